// What `ulimit -u` leaves the jobs: a user's processes (threads, as the
// kernel counts them) are capped by RLIMIT_NPROC, and a job whose shell
// cannot fork fails as if its command had, with nothing to say why.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace pto::cli {

// The notice said at start when `limit` (RLIMIT_NPROC's soft value) with
// `running` tasks of the user leaves fewer than two processes (a shell and
// its command) for each of `jobs` jobs at once. Nothing otherwise.
std::optional<std::string> process_limit_notice(std::uint64_t limit, std::uint64_t running, std::size_t jobs);

// This run's: the soft limit and the tasks of this real user now (read
// from /proc), for process_limit_notice. Nothing without a limit, or for
// root, whom the kernel does not hold to it.
std::optional<std::string> process_limit_notice(std::size_t jobs);

}  // namespace pto::cli
