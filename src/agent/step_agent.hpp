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

// How long what the line left gets between SIGTERM and SIGKILL.
inline constexpr int leftover_grace_ms = 5000;

// Writes `header` (a whole frame), runs `shell -c command` with its
// standard error on its standard output, and ends with the end frame
// (slurm::step_end_marker). Returns the agent's exit status.
int run_step(const char* shell, const std::string& command, std::string_view header);

}  // namespace pto::agent
