// The static check of what execve(2) must take: a job whose arguments and
// environment could not fit the kernel's limits with the devices and ports
// it may be given is an error before anything starts, not a failed job.
#pragma once

#include <span>
#include <string>

#include <pto/scheduler.hpp>

#include "devices/discovery.hpp"

namespace pto::cli {

struct ExecLimits {
    std::size_t one_string;  // MAX_ARG_STRLEN: one argument or NAME=VALUE, its NUL included
    std::size_t total;       // sysconf(_SC_ARG_MAX): strings and pointers of argv and envp
};

// This machine's limits now (the total follows RLIMIT_STACK).
ExecLimits exec_limits();

// Each job of `jobs` built for its worst case (the devices of `pool` whose
// names are longest, the highest ports of [port_low, port_high]) and
// measured with the inherited environment. One compiler-style error per
// job that cannot fit, on standard error, naming the file's line; true if
// there was one.
bool report_exec_too_large(const std::string& file, std::span<const Job> jobs, const DiscoveredPool& pool,
                           int port_low, int port_high, const ExecLimits& limits);

}  // namespace pto::cli
