// One job -> one process in a process group of its own, without a
// controlling terminal, optionally inside a cgroup, whose
// stdout and stderr are one pipe. Knows nothing of scheduling.
#pragma once

#include <sys/types.h>

#include <pto/error.hpp>
#include <pto/scheduler.hpp>

#include "common/unique_fd.hpp"
#include "runner/environment.hpp"

namespace pto::runner {

struct Child {
    pid_t pid = -1;   // also its process group id
    UniqueFd output;  // read end, non-blocking, close-on-exec
};

class Guardian;

struct LaunchContext {
    const Environment* env = nullptr;
    int dev_null = -1;  // opened once per run, read-only
    Guardian* guardian = nullptr;  // told of each job's start and end, when there is one
};

// Starts `spec` as the leader of a new process group, without a controlling
// terminal, with stdin on /dev/null and
// stdout and stderr joined on a fresh pipe, every signal at its default and
// none blocked; the child gets SIGKILL if this process dies. With
// `cgroup_dir` >= 0 (a cgroup's directory) the child is born in that cgroup
// where the kernel can (clone3), else it moves itself there through the
// cgroup's cgroup.procs before it runs anything. An error means nothing was
// left running; its sys_errno is EMFILE/ENFILE/EAGAIN when a resource was
// short.
Expected<Child> launch(const LaunchSpec& spec, const LaunchContext& ctx, int cgroup_dir = -1);

// Whether this kernel (not qemu-user, which has no clone3) starts a child
// in a cgroup with clone3: such a child costs two descriptors fewer at its
// start (launch reports an exec failure through memory, not a pipe) and
// needs no cgroup.procs. Asked of the kernel without starting anything.
bool can_start_in_cgroup();

// The file execve would run for argv[0]: itself when it holds a '/', else the
// first executable match in `path_var`.
Expected<std::string> resolve_program(const std::string& name, std::string_view path_var);

}  // namespace pto::runner
