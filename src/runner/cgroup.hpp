// Containment by cgroup v2: each job in a cgroup of its own under one made
// for the run, as Slurm's proctrack/cgroup and systemd scopes do. What leaves
// the job's process group or session (setsid, double fork, daemons) is still
// in its cgroup; `cgroup.kill` stops all of it; `cgroup.events` says
// `populated 0` when nothing is left, and wakes poll() with POLLPRI.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include <pto/error.hpp>

#include "common/unique_fd.hpp"

namespace pto::runner {

// Where this process sits in the unified hierarchy, found from
// /proc/self/mountinfo and /proc/self/cgroup, never from a fixed path.
// An error says why cgroups cannot be used (no v2 mount, not writable...).
Expected<std::string> own_cgroup_dir();

class JobCgroup {
public:
    JobCgroup() = default;
    JobCgroup(JobCgroup&&) = default;
    JobCgroup& operator=(JobCgroup&&) = default;
    JobCgroup(const JobCgroup&) = delete;
    JobCgroup& operator=(const JobCgroup&) = delete;
    ~JobCgroup();  // kills what is left, then removes the directory

    // The directory, for clone3's CLONE_INTO_CGROUP (or its cgroup.procs,
    // where a child moves itself in where clone3 cannot). Needed only until
    // then: close_start_fds() gives the descriptor back.
    int dir_fd() const { return dir_.get(); }
    void close_start_fds() { dir_.reset(); }
    // Open for reading: POLLPRI when `populated` changes.
    int events_fd() const { return events_.get(); }

    bool populated() const;
    std::vector<pid_t> pids() const;
    void signal_all(int sig) const;  // each process in it; a racing exit is fine
    void kill_all() const;           // cgroup.kill, or SIGKILL to each where the kernel lacks it
    const std::string& path() const { return path_; }

private:
    friend class RunCgroup;
    std::string path_;
    UniqueFd dir_;
    UniqueFd events_;
    mutable bool killed_ = false;  // kill_all() was used: not for another job (RunCgroup::recycle)
};

// The run's own cgroup, a child of the one this process is in; jobs' cgroups
// go below it. Removed at the end (once its jobs' cgroups are gone).
class RunCgroup {
public:
    // Also removes what earlier runs that died (SIGKILL) left behind beside
    // it: their cgroups are killed, so that no job of a dead run can hold a
    // device that this run hands out. A run holds an flock on its cgroup's
    // directory for as long as it lives (the kernel drops it when the run
    // dies): a cgroup whose lock is free is a dead run's, whatever its
    // name says; pids say nothing across PID namespaces. The run's own name
    // is one no other run holds: a mkdir that fails with EEXIST, or a lock
    // another run holds, picks another name; nothing is ever adopted.
    static Expected<RunCgroup> create();

    RunCgroup(RunCgroup&&) = default;
    RunCgroup& operator=(RunCgroup&&) = default;
    RunCgroup(const RunCgroup&) = delete;
    RunCgroup& operator=(const RunCgroup&) = delete;
    ~RunCgroup();

    // A cgroup for a job to be born in: one an ended job left empty
    // (recycle), else a new one called `name`.
    Expected<JobCgroup> make_job(const std::string& name);
    // An ended job's cgroup, for a later job if it is empty: making and
    // removing a cgroup costs some 80 us, as much as the rest of what
    // pto-par does to start and end a short job. One that is not empty is
    // removed as ever.
    void recycle(JobCgroup job);
    const std::string& path() const { return path_; }
    // Processes of runs that died, stopped at create(); for a notice.
    int stale_stopped() const { return stale_stopped_; }

private:
    RunCgroup() = default;
    std::string path_;
    UniqueFd lock_;  // the directory of path_, flocked while the run lives
    int stale_stopped_ = 0;
    std::vector<JobCgroup> free_;  // empty, their start descriptors closed
};

}  // namespace pto::runner
