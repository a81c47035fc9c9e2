#include "cli/process_limit.hpp"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/read_file.hpp"

namespace pto::cli {
namespace {

// Tasks of real user `uid`: the Threads of each of its processes. A
// process that ends while it is looked at counts as nothing.
std::uint64_t tasks_of(uid_t uid)
{
    std::uint64_t tasks = 0;
    const std::unique_ptr<DIR, int (*)(DIR*)> proc(opendir("/proc"), closedir);
    if (!proc)
        return 0;
    while (const dirent* e = readdir(proc.get())) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        const auto status = read_file(std::string("/proc/") + e->d_name + "/status", 1 << 16, "process status");
        if (!status)
            continue;
        const auto field = [&status](const char* name) -> long long {
            const auto at = status->find(name);
            if (at == std::string::npos)
                return -1;
            return std::strtoll(status->c_str() + at + std::strlen(name), nullptr, 10);
        };
        if (field("\nUid:") == static_cast<long long>(uid))
            if (const long long n = field("\nThreads:"); n > 0)
                tasks += static_cast<std::uint64_t>(n);
    }
    return tasks;
}

}  // namespace

std::optional<std::string> process_limit_notice(std::uint64_t limit, std::uint64_t running, std::size_t jobs)
{
    // One more for the guardian, which starts after this look.
    const std::uint64_t left = limit > running + 1 ? limit - running - 1 : 0;
    if (jobs == 0 || left >= 2 * jobs)
        return std::nullopt;
    return "ulimit -u allows this user " + std::to_string(limit) + " processes and " + std::to_string(running) +
           " run now: that leaves " + std::to_string(left / jobs) + " for each of -j " + std::to_string(jobs) +
           " jobs at once, and a job whose shell cannot fork fails (lower -j, or raise ulimit -u)";
}

std::optional<std::string> process_limit_notice(std::size_t jobs)
{
    rlimit lim{};
    if (getrlimit(RLIMIT_NPROC, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY || geteuid() == 0)
        return std::nullopt;
    return process_limit_notice(lim.rlim_cur, tasks_of(getuid()), jobs);
}

}  // namespace pto::cli
