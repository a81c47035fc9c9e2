#include "placement/local_devices.hpp"

namespace pto::placement {

bool LocalDevices::acquire(std::size_t count, Grant& grant)
{
    auto ids = pool_.acquire(count);
    if (!ids)
        return false;
    grant.devices = std::move(*ids);
    grant.device_count = count;
    return true;
}

// The pool hands out any free ids when no consecutive run fits, so a count
// is all it takes.
bool LocalDevices::fits_after(std::size_t count, std::span<const Grant* const> freed) const
{
    std::size_t free = pool_.free_count();
    for (const Grant* g : freed)
        free += g->devices.size();
    return free >= count;
}

}  // namespace pto::placement
