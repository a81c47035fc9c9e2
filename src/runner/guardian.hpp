// Nothing outlives the run, even when pto-par is SIGKILLed (SPEC 10): a
// guardian process, started with the run outside the jobs' groups and
// session, is told of each job as it starts and ends through a socket. When
// the run's end of it closes (the run is over, however it ended) it stops
// what the run left: each job's process group it was not told had ended,
// and under cgroup containment everything in the run's cgroup
// (cgroup.kill), whose cgroups it then removes; then it exits. Should the
// guardian die first (SIGKILL: it blocks every other signal), the run sees
// its end of the socket hang up in its poll and starts another, which it
// tells of every job still running.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include <pto/error.hpp>
#include <pto/scheduler.hpp>

#include "common/unique_fd.hpp"

namespace pto::runner {

class Guardian final : public PollClient {
public:
    // `run_cgroup`: the run's cgroup directory, empty under process groups.
    // `most_jobs`: how many jobs may run at once at most (its table is
    // made before the fork: the guardian allocates nothing).
    static Expected<Guardian> start(const std::string& run_cgroup, std::size_t most_jobs);

    Guardian(Guardian&& o) noexcept;
    Guardian& operator=(Guardian&&) = delete;
    Guardian(const Guardian&) = delete;
    Guardian& operator=(const Guardian&) = delete;
    // Closes the socket and reaps the guardian, which finds nothing left.
    ~Guardian() override;

    // A job's leader, which is its process group's id, started or ended
    // (its group empty: its id may be reused from now on).
    void job_started(pid_t pgid);
    void job_ended(pid_t pgid);

    pid_t pid() const { return pid_; }

    // Said when the guardian died and what took its place ("the guardian,
    // pid 12, died; pid 13 took its place for the 2 running jobs").
    void on_lost(std::function<void(const std::string&)> say) { say_ = std::move(say); }

    // PollClient: the run's end of the socket, which hangs up when the
    // guardian dies; -1 once no new guardian could be started.
    int poll_fd() const override { return socket_.get(); }
    short poll_events() const override { return 0; }
    void on_ready(short revents) override;

private:
    Guardian() = default;
    Expected<void> launch();
    void tell(pid_t value);

    pid_t pid_ = -1;
    UniqueFd socket_;
    std::string cgroup_;
    std::size_t slots_ = 1;
    std::vector<pid_t> running_;  // what a new guardian is told
    std::function<void(const std::string&)> say_;
};

}  // namespace pto::runner
