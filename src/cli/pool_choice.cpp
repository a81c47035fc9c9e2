#include "cli/pool_choice.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdlib>

#include <pto/devices.hpp>

namespace pto::cli {

Expected<DiscoveredPool> choose_pool(const std::string& spec)
{
    if (spec == "none")
        return DiscoveredPool{{}, "-d none", {}, {}};
    if (spec == "auto")
        return discover_devices([](const char* name) -> const char* { return std::getenv(name); }, "/dev");
    auto ids = parse_device_range(spec);
    if (!ids)
        return fail("--devices: " + ids.error().message);
    return DiscoveredPool{std::move(*ids), "-d " + spec, {}, {}};
}

std::size_t auto_parallel(const std::string& platform, std::size_t pool_size)
{
    // The CPUs this process may run on, as nproc(1) counts them: a taskset
    // or cpuset narrower than the machine is what the jobs get too.
    cpu_set_t set;
    CPU_ZERO(&set);
    const std::size_t ncpu =
        sched_getaffinity(0, sizeof set, &set) == 0 ? static_cast<std::size_t>(std::max(1, CPU_COUNT(&set))) : 1;
    if (pool_size == 0)
        return ncpu;
    const bool sim = platform.size() >= 3 && platform.compare(platform.size() - 3, 3, "sim") == 0;
    return sim ? std::min(ncpu, pool_size) : pool_size;
}

}  // namespace pto::cli
