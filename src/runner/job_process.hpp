// One running job, passive: its leader, what contains it (a cgroup, or its
// session's process group), its output pipe and what it wrote, and how far
// stopping it has gone. It decides nothing; its destructor kills and reaps
// what is left, so no way out of a run leaves a job running.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <pto/job_output.hpp>

#include "common/unique_fd.hpp"
#include "runner/cgroup.hpp"
#include "runner/job_lifecycle.hpp"
#include "runner/slurm_step.hpp"

namespace pto::runner {

// How long a SIGKILLed leader is waited for at teardown before it is left
// to the kernel: only a process stuck in a driver takes longer.
inline constexpr int teardown_wait_ms = 2000;

class JobProcess final : public Signallable {
public:
    JobProcess(std::size_t index, pid_t pid, UniqueFd out, std::optional<JobCgroup> cgroup, JobOutput output,
               Clock::time_point started, const StopTimes& stop_times);
    ~JobProcess();
    JobProcess(const JobProcess&) = delete;
    JobProcess& operator=(const JobProcess&) = delete;

    std::size_t index() const { return index_; }
    pid_t pid() const { return pid_; }
    Clock::time_point started() const { return started_; }
    // A step is started when its task runs, not when srun was started.
    void mark_started(Clock::time_point t) { started_ = t; }
    const JobCgroup* cgroup() const { return cgroup_ ? &*cgroup_ : nullptr; }
    // A Slurm step: its leader is srun, and it is signalled through scancel.
    void set_step(StepState step) { step_ = std::move(step); }
    const StepState* step() const { return step_ ? &*step_ : nullptr; }
    StepState* step() { return step_ ? &*step_ : nullptr; }

    int output_fd() const { return out_.get(); }
    // Moves what the pipe holds now into output(), at most `max_reads`
    // chunks of `chunk` bytes (unbounded with 0), handing the bytes to `live`
    // if set. With `passage` (fd >= 0) the bytes go there as they are
    // (JobOutput::pass_from_pipe) while it takes them, and to `live` from
    // the first time it does not. The pipe is closed at EOF or on an error
    // that makes it unreadable.
    void read_output(std::size_t chunk, int max_reads, const std::function<void(std::string_view)>& live,
                     JobOutput::Passage passage = {});
    // After a pass that found the pipe far from full (read_output with a
    // passage), its pipe is left out of the poll until then: see the .cpp.
    Clock::time_point resting_until() const { return resting_until_; }
    JobOutput& output() { return output_; }
    const JobOutput& output() const { return output_; }

    // The leader's end, from waitpid.
    bool leader_alive() const { return !status_; }
    void leader_exited(int wait_status) { status_ = wait_status; }
    // A step's is its line's, as the agent told (srun's own otherwise).
    int wait_status() const;
    // Processes the line left that were stopped where it ran, not by the
    // run: a step's agent counts them in its end frame. 0 for a local job,
    // whose leftovers the run stops itself.
    int stopped_where_it_ran() const;

    // Nothing of the job is left: the leader reaped, its cgroup empty (or,
    // without one, its process group gone).
    bool empty() const;
    // What is left of it, for messages: "pid 12 (sleep, state S)".
    std::vector<pid_t> members() const;
    int member_count() const;  // -1 when it cannot be told

    // Its cgroup, once nothing of the job is left in it, for another job;
    // nothing otherwise. The job is then over for good.
    std::optional<JobCgroup> take_empty_cgroup();

    // To everything of the job.
    void signal(int sig) const override;
    void kill_all() const override;

    JobLifecycle life;
    int checked_device = -1;             // >= 0: a health check of this device, not a job
    bool is_check() const { return checked_device >= 0; }
    bool exit_handled = false;           // the scheduler has taken the leader's end into account
    bool start_reported = false;         // observers have seen it start (a step: once its task runs)
    bool cancelled_pending = false;      // a step stopped before Slurm created it: it never ran
    bool relaunch = false;               // a step its node could not start: to be tried on another
    // A step that keeps a sick GPU from Slurm until the run's end
    // (--device-check): no job's any more, though index() is still its job's.
    bool holding = false;

private:
    void read_step_output(std::size_t chunk, int max_reads, const std::function<void(std::string_view)>& live);

    std::size_t index_;
    pid_t pid_;
    UniqueFd out_;
    std::optional<JobCgroup> cgroup_;
    bool cgroup_taken_ = false;  // empty when take_empty_cgroup() took it
    std::optional<StepState> step_;
    JobOutput output_;
    Clock::time_point started_;
    Clock::time_point resting_until_{};
    std::optional<int> status_;
};

}  // namespace pto::runner
