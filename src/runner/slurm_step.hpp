// A job as a Slurm job step: the srun command line that starts it on the
// node the scheduler chose, the header the step writes first (where it runs,
// which GPUs Slurm gave it), and stopping it through slurmctld. srun itself
// is never sent SIGTERM: it would SIGKILL the task at once, so the task's
// own handlers would never run.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <pto/scheduler.hpp>

#include "runner/launcher.hpp"
#include "slurm/allocation.hpp"
#include "slurm/step_checks.hpp"

namespace pto::runner {

// scancel processes started and not yet reaped. They run beside the loop,
// never waited for in it: a run stopping twenty steps sends twenty scancels
// at once instead of queueing twenty round trips to slurmctld.
class Helpers {
public:
    explicit Helpers(const LaunchContext& ctx) : ctx_(ctx) {}
    ~Helpers();  // waits a bounded time for those still running
    Helpers(const Helpers&) = delete;
    Helpers& operator=(const Helpers&) = delete;

    void spawn(const std::vector<std::string>& argv);
    // A reaped pid: true if it was one of ours.
    bool forget(pid_t pid);
    const std::vector<pid_t>& pids() const { return pids_; }

private:
    const LaunchContext& ctx_;
    std::vector<pid_t> pids_;
};

struct StepControl {
    std::string scancel;
    Helpers* helpers;
    std::function<void(const std::string&)> notice;  // srun's and slurmstepd's own lines
};

// Where one step stands, as its output has told so far.
class StepState {
public:
    // `name`: its srun's -J (step_name), by which squeue finds it.
    StepState(std::string node, const StepControl& control, std::string name = {})
        : node_(std::move(node)), name_(std::move(name)), control_(&control)
    {
    }

    const std::string& node() const { return node_; }
    const std::string& name() const { return name_; }
    // Set once the task runs and has said where and with what.
    const std::optional<slurm::StepHeader>& header() const { return header_; }

    // Takes the header out of the first bytes of output, and later srun's
    // and slurmstepd's lines (to notices) and the agent's end frame: returns
    // what of `bytes` is the job's own output. Lines before the header
    // (srun's errors when the step cannot start) are output.
    std::string_view filter(std::string_view bytes);
    // srun's word that Slurm created the step but could not start its task
    // on the node (its slurmd gone, the node down): empty otherwise.
    const std::string& launch_failure() const { return launch_failure_; }
    // The agent has said how the line ended, and nothing of it is left.
    bool ended() const { return end_.has_value(); }
    // The line's wait status: the agent's word, else what srun's own
    // (`srun_status`) tells of a task killed by a signal; nothing when srun's
    // is all there is.
    std::optional<int> wait_status(int srun_status) const;
    // What the line left that the agent stopped, as its end frame says.
    int leftovers() const { return end_ ? end_->leftovers : 0; }
    // The agent's verdicts on the step's GPUs (--device-check) that came
    // since the last call.
    std::vector<slurm::CheckVerdict> take_verdicts();
    // A check failed: the step keeps its GPUs from Slurm until it gets
    // SIGTERM (before the header: its line never ran).
    bool holding() const { return holding_; }
    // Slurm created the step (squeue lists it under its name) though its
    // header has not come: it is stopped as a running one, through `id`.
    void set_created(std::string id) { id_ = std::move(id); }
    bool created() const { return header_.has_value() || !id_.empty(); }
    // Verdicts came after the header: the agent checked the GPUs after
    // the line failed.
    bool checked_after_line() const { return checked_after_line_; }
    // The GPUs its checks found sick.
    const std::vector<int>& sick() const { return sick_; }
    // At EOF: a partial line still held back, as output.
    std::string take_pending();

    // The step's task gets `sig` through slurmctld; before the step runs
    // there is none, and the srun (`srun_pid`, alone, not its group: its
    // helper child must live to cancel the pending step) gets SIGKILL
    // for a stop, nothing for anything else.
    void signal(int sig, pid_t srun_pid) const;

private:
    std::string node_;
    std::string name_;
    const StepControl* control_;
    void filter_body();
    void take_frame(std::string_view line);

    std::optional<slurm::StepHeader> header_;
    std::optional<slurm::StepEnd> end_;
    std::string launch_failure_;
    std::vector<slurm::CheckVerdict> verdicts_;
    std::vector<int> sick_;
    std::string id_;  // JOB.STEP from the hold frame or squeue, before (or without) a header
    bool holding_ = false;
    bool checked_after_line_ = false;
    bool header_done_ = false;  // the header came, or never will
    bool at_line_start_ = true;  // of the job's output, after the header
    std::string pending_;       // a partial line, while the header may still come
    std::string passed_;        // what filter() returns, kept alive here
};

// srun --exact -N1 -n1 -w NODE --gres=gpu:N -J NAME ... before `argv`,
// which is the agent (`pto-par --slurm-step ...`).
std::vector<std::string> step_argv(const SlurmOptions& slurm, const std::string& node, std::size_t gpus,
                                   const std::string& name, const std::vector<std::string>& argv);

// A name for the step of a job's `launch`th srun in this run, unique in the
// allocation: "pto-par.PID.N".
std::string step_name(std::size_t launch);

// The steps of the allocation Slurm has created now, "JOB.STEP NAME" each,
// from `squeue -s` (run to its end: a stop waits for it, once for all its
// steps).
Expected<std::vector<std::string>> created_steps(const SlurmOptions& slurm, const LaunchContext& ctx);

}  // namespace pto::runner
