// What is left of a job's process group after its leader.
#pragma once

#include <sys/types.h>

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

}  // namespace pto::runner
