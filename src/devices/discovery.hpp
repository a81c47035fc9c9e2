// Where `-d auto` finds the pool.
#pragma once

#include <string>
#include <vector>

#include <pto/error.hpp>

namespace pto {

struct DiscoveredPool {
    std::vector<int> ids;
    std::string source;  // for -v: "$PTO_PAR_DEVICES", "no devices found"
};

// `getenv` is passed in so tests need not touch the process environment.
Expected<DiscoveredPool> discover_devices(const char* (*getenv_fn)(const char*));

}  // namespace pto
