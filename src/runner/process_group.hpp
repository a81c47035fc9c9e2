// What is left of a job's process group after its leader, and what /proc
// says of processes.
#pragma once

#include <sys/types.h>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pto::runner {

// True while any process (zombies included) is in the group.
bool group_exists(pid_t pgid);

// Sends `sig` to the whole group; a group that is already gone is fine.
void signal_group(pid_t pgid, int sig);

// How many processes the group holds, from /proc; -1 when /proc cannot tell
// (not mounted, as in a bare chroot).
int count_group_members(pid_t pgid);

// The processes in the group, from /proc; empty when /proc cannot tell.
std::vector<pid_t> group_members(pid_t pgid);

// This process's children, from /proc (every thread's children file, or
// a scan of /proc/*/stat where those files do not exist). Empty when /proc
// cannot tell.
std::vector<pid_t> children_of_this_process();

// Every live process under this one (children, their children, ...), from
// /proc; zombies left out. Empty when /proc cannot tell.
std::vector<pid_t> descendants_of_this_process();

// The pids of a whitespace-separated list (cgroup.procs, /proc/.../children).
std::vector<pid_t> parse_pids(std::string_view text);

// Waits at most `ms` in all for each of our children `pids` to end, all at
// once (N stuck ones cost `ms`, not N times it), reaping those that did:
// each one's wait status, in order; nothing for one still running. One
// reaped elsewhere already (ECHILD) counts as ended with status 0.
std::vector<std::optional<int>> reap_all_within(std::span<const pid_t> pids, int ms);

// "pid 12 (sleep, state D), pid 13 (...)" from /proc, for the quarantine
// notice; a pid alone where /proc cannot tell.
std::string describe_processes(const std::vector<pid_t>& pids);

}  // namespace pto::runner
