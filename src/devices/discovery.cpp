#include "devices/discovery.hpp"

#include <pto/devices.hpp>

namespace pto {

Expected<DiscoveredPool> discover_devices(const char* (*getenv_fn)(const char*))
{
    if (const char* v = getenv_fn("PTO_PAR_DEVICES"); v != nullptr) {
        auto ids = parse_device_range(v);
        if (!ids)
            return fail("$PTO_PAR_DEVICES: " + ids.error().message);
        return DiscoveredPool{std::move(*ids), "$PTO_PAR_DEVICES"};
    }
    return DiscoveredPool{{}, "no devices found"};
}

}  // namespace pto
