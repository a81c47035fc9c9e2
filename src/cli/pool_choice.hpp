// The device pool of -d and the -j auto that follows from it.
#pragma once

#include <cstddef>
#include <string>

#include <pto/error.hpp>

#include "devices/discovery.hpp"

namespace pto::cli {

// -d: "none", "auto" (found from the environment and /dev) or a range.
Expected<DiscoveredPool> choose_pool(const std::string& spec);

// -j auto: on hardware a job per device (the host mostly waits on the
// devices); on a simulator also at most one per CPU, since each simulated
// job keeps CPUs busy; with no devices at all, one per CPU.
std::size_t auto_parallel(const std::string& platform, std::size_t pool_size);

}  // namespace pto::cli
