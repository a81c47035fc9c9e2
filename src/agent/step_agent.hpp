// The step agent: what `pto-par --slurm-step` does on a node of a Slurm
// allocation, so that a step is a job like a local one whatever the
// cluster's proctrack plugin. It runs the line as a child subreaper, so that
// nothing the line starts is ever re-parented out of the step (where
// slurmstepd's signals and its SIGKILL no longer reach it); it lives through
// the signals Slurm sends to every process of the step (the job gets them
// itself); when the line ends it stops what the line left (SIGTERM, then
// SIGKILL after a grace) and exits only once nothing of the job is left;
// and it tells the run the line's wait status out of band, as the last
// frame of its output, exiting 0 itself so that srun adds no words of its
// own to the job's output.
#pragma once

#include <string>
#include <string_view>

namespace pto::agent {

// Writes `header` (a whole frame), runs `shell -c command` with its
// standard error on its standard output, gives what the line left
// `grace_ms` between SIGTERM and SIGKILL (the run's --kill-grace), and
// ends with the end frame (slurm::step_end_marker). Returns the agent's
// exit status.
int run_step(const char* shell, const std::string& command, std::string_view header, long grace_ms);

}  // namespace pto::agent
