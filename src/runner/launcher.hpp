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
// where the kernel can (clone3), else it moves itself there through
// `cgroup_procs` (its cgroup.procs, open for writing) before it runs anything. An error means nothing was left
// running; its sys_errno is EMFILE/ENFILE/EAGAIN when a resource was short.
Expected<Child> launch(const LaunchSpec& spec, const LaunchContext& ctx, int cgroup_dir = -1, int cgroup_procs = -1);

// The file execve would run for argv[0]: itself when it holds a '/', else the
// first executable match in `path_var`.
Expected<std::string> resolve_program(const std::string& name, std::string_view path_var);

}  // namespace pto::runner
