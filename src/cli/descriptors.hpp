// File descriptors (SPEC 10): as many as the hard limit allows, and exit 2
// at start when not even one job could run, rather than a FAIL per job.
#pragma once

#include <cstddef>
#include <string>

#include <pto/error.hpp>

namespace pto::cli {

// What starting one job can hold at once: its pipe (2), the pipe an exec
// failure comes back through (2), its spill file, and under cgroup
// containment its cgroup's directory and cgroup.events; a child born in its
// cgroup by clone3 needs no such pipe, one moved there needs cgroup.procs
// too. Under cgroups the run's own cgroup directory, held locked, is
// counted here as well. And what the run itself opens (/dev/null, the
// guardian's pipe; it reads its signals from pto-par's own signalfd).
inline constexpr std::size_t run_descriptors = 2;
inline constexpr std::size_t job_descriptors_pgroup = 5;
inline constexpr std::size_t job_descriptors_cgroup_clone3 = 6;
inline constexpr std::size_t job_descriptors_cgroup = 9;
// With leases across runs: the lock directory, its inotify watch, the
// patience timer and the epoll of both (a lease per device and port of the
// job comes on top).
inline constexpr std::size_t lease_run_descriptors = 4;

// Raises the soft RLIMIT_NOFILE to the hard limit (jobs inherit it); a
// failure leaves the limit as it was, which the check below then judges.
void raise_descriptor_limit();

// An error naming the limit when fewer than `run_descriptors + per_job`
// descriptors are free now (counted in /proc/self/fd).
Expected<void> check_descriptors(std::size_t per_job);

}  // namespace pto::cli
