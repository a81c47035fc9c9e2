// Without cgroups, a process that left its job's session and process group
// (setsid, setpgid) escapes the job's signals; once its parent is gone it is
// re-parented to this process as subreaper. Nothing of a run may outlive it:
// at the end they are found and stopped.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace pto::runner {

class Escapees {
public:
    using Clock = std::chrono::steady_clock;
    // Waits for a child to end until the deadline; false: stop waiting (a
    // second stop signal), SIGKILL at once.
    using Wait = std::function<bool(Clock::time_point deadline)>;

    // Remembers the children this process has before the run: they are the
    // caller's, never ours to stop.
    Escapees();

    // This process's children now that are not the caller's nor in `keep`.
    std::vector<pid_t> find(const std::vector<pid_t>& keep) const;

    // SIGTERM (SIGKILL with `force`) to each of `pids`, `grace` for them to
    // go, then SIGKILL to what is left and `wait_after_kill`.
    void stop(std::vector<pid_t> pids, const std::vector<pid_t>& keep, bool force, Clock::duration grace,
              Clock::duration wait_after_kill, const Wait& wait) const;

private:
    void wait_gone(Clock::time_point deadline, const std::vector<pid_t>& keep, const Wait& wait) const;

    std::vector<pid_t> before_;
};

// "stopping 2 processes that left their job's process group: pid 12 34"
std::string escapee_notice(const std::vector<pid_t>& pids);

}  // namespace pto::runner
