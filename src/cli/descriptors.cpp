#include "cli/descriptors.hpp"

#include <dirent.h>
#include <sys/resource.h>

namespace pto::cli {
namespace {

// Descriptors open now, or 0 when /proc is not there to say (then the
// check is left to the jobs, which wait for one another on a shortage).
std::size_t open_descriptors()
{
    DIR* d = opendir("/proc/self/fd");
    if (d == nullptr)
        return 0;
    std::size_t n = 0;
    while (const dirent* e = readdir(d))
        if (e->d_name[0] != '.')
            ++n;
    // Read-only: closing cannot lose anything. One of the entries was the
    // directory's own descriptor, gone now.
    (void)closedir(d);
    return n > 0 ? n - 1 : 0;
}

}  // namespace

void raise_descriptor_limit()
{
    rlimit rl {};
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    rl.rlim_cur = rl.rlim_max;
    // EPERM cannot happen below the hard limit; on any failure the soft
    // limit stays, and check_descriptors measures against it.
    (void)setrlimit(RLIMIT_NOFILE, &rl);
}

Expected<void> check_descriptors(std::size_t per_job)
{
    rlimit rl {};
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return {};
    const std::size_t open = open_descriptors();
    const auto limit = static_cast<std::size_t>(rl.rlim_cur);
    const std::size_t needed = open + run_descriptors + per_job;
    if (open == 0 || needed <= limit)
        return {};
    return fail("too few file descriptors to run even one job: the limit is " + std::to_string(limit) +
                " (ulimit -n; the hard limit too), " + std::to_string(open) + " are open, and a job needs " +
                std::to_string(run_descriptors + per_job) + " more; raise it to at least " + std::to_string(needed));
}

}  // namespace pto::cli
