// Nothing outlives the run, even when pto-par is SIGKILLed (SPEC 10): a
// guardian process, started with the run outside the jobs' groups and
// session, is told of each job as it starts and ends through a pipe. When
// the run's end of the pipe closes (the run is over, however it ended) it
// stops what the run left: each job's process group it was not told had
// ended, and under cgroup containment everything in the run's cgroup
// (cgroup.kill), whose cgroups it then removes; then it exits.
#pragma once

#include <sys/types.h>

#include <string>

#include <pto/error.hpp>

#include "common/unique_fd.hpp"

namespace pto::runner {

class Guardian {
public:
    // `run_cgroup`: the run's cgroup directory, empty under process groups.
    // `most_jobs`: how many jobs may run at once at most (its table is
    // made before the fork: the guardian allocates nothing).
    static Expected<Guardian> start(const std::string& run_cgroup, std::size_t most_jobs);

    Guardian(Guardian&& o) noexcept;
    Guardian& operator=(Guardian&&) = delete;
    Guardian(const Guardian&) = delete;
    Guardian& operator=(const Guardian&) = delete;
    // Closes the pipe and reaps the guardian, which finds nothing left.
    ~Guardian();

    // A job's leader, which is its process group's id, started or ended
    // (its group empty: its id may be reused from now on).
    void job_started(pid_t pgid) { tell(pgid); }
    void job_ended(pid_t pgid) { tell(-pgid); }

    pid_t pid() const { return pid_; }

private:
    Guardian() = default;
    void tell(pid_t value);

    pid_t pid_ = -1;
    UniqueFd pipe_;
};

}  // namespace pto::runner
