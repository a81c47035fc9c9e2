// One job -> one process group whose stdout and stderr are one pipe.
// Knows nothing of scheduling.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <pto/error.hpp>
#include <pto/scheduler.hpp>

#include "runner/environment.hpp"
#include "common/unique_fd.hpp"

namespace pto::runner {

struct Child {
    pid_t pid = -1;       // also its process group id
    UniqueFd output;      // read end, non-blocking, close-on-exec
    bool direct = false;  // `/bin/sh -c LINE` was run as LINE's program (direct_exec.hpp)
};

struct LaunchContext {
    const Environment* env = nullptr;
    int dev_null = -1;            // opened once per run, read-only
    const sigset_t* child_mask;   // the mask the caller had before the run blocked signals
};

// Starts `spec` in a new process group with stdin on /dev/null and stdout and
// stderr joined on a fresh pipe; the child gets SIGKILL if this process dies.
// An error means nothing was left running. `/bin/sh -c LINE` whose LINE is
// one plain command is run as that command, as dash would (direct_exec.hpp).
Expected<Child> launch(const LaunchSpec& spec, const LaunchContext& ctx);

// The file execve would run for argv[0]: itself when it holds a '/', else the
// first executable match in `path_var`.
Expected<std::string> resolve_program(const std::string& name, std::string_view path_var);

}  // namespace pto::runner
