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

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <pto/error.hpp>

namespace pto::agent {

// The health checks of a step's GPUs (--device-check under --launcher
// slurm). Before the line, each GPU of the step the run does not trust yet
// is checked, one at a time, contained like the line and given `timeout_ms`;
// after a line that failed (non-zero, or a signal no stop of the run's
// brought) every GPU of the step is, in the same step, so that no other
// step gets them meanwhile. Each verdict goes out as a check frame
// (slurm/step_checks.hpp). When one is sick the step holds its GPUs: the
// line is not run (or its end frame is followed by) a hold frame, and the
// agent waits for SIGTERM, which the run sends at its end.
struct Checks {
    std::string command;       // --device-check's, placeholders not yet replaced
    long timeout_ms = 60000;
    std::vector<int> trusted;  // the step's GPUs the run trusts: not checked before the line
};

struct Step {
    const char* shell = nullptr;
    std::string command;  // the line, placeholders not yet replaced
    std::string id;       // JOB.STEP
    std::string header;   // the whole header frame
    std::vector<int> gpus;
    long grace_ms = 0;    // the run's --kill-grace, for what a line or check leaves
    const Checks* checks = nullptr;
    // Sets the job's variables (PTO_PAR_DEVICES, -e names) to `ids` and
    // returns `command` with its placeholders replaced for them.
    std::function<Expected<std::string>(std::span<const int> ids, const std::string& command)> prepare;
};

// Writes the header (a whole frame), runs `shell -c command` with its
// standard error on its standard output, gives what the line left
// `grace_ms` between SIGTERM and SIGKILL, and ends with the end frame
// (slurm::step_end_marker); with checks, as Checks says. Returns the
// agent's exit status.
int run_step(const Step& step);

}  // namespace pto::agent
