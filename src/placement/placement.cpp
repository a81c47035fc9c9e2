#include "placement/placement.hpp"

#include "runner/port_probe.hpp"

namespace pto::placement {

Placement::Placement(std::unique_ptr<Devices> devices, int port_low, int port_high)
    : devices_(std::move(devices)), ports_(port_low, port_high), port_low_(port_low), port_high_(port_high)
{
}

tl::expected<Grant, Shortage> Placement::acquire(const Need& need)
{
    Grant grant;
    if (!devices_->acquire(need.devices, need.slots, grant))
        return tl::unexpected(Shortage::devices);
    auto ports = ports_.acquire(need.ports, runner::tcp_port_free);
    if (!ports) {
        devices_->release(grant);
        return tl::unexpected(Shortage::ports);
    }
    grant.ports = std::move(*ports);
    return grant;
}

void Placement::release(const Grant& grant)
{
    devices_->release(grant);
    ports_.release(grant.ports);
}

void Placement::withhold(const Grant& grant)
{
    devices_->withhold(grant);
    ports_.withhold(grant.ports);
}

bool Placement::usable_for(const Need& need) const
{
    return need.devices <= devices_->usable() && need.ports <= ports_.usable();
}

std::string Placement::shortfall(const Need& need) const
{
    return "needs " + std::to_string(need.devices) + " devices but only " + std::to_string(devices_->usable()) +
           " remain usable" + devices_->scope();
}

bool Placement::fits_after(const Need& need, std::span<const Grant* const> freed) const
{
    return devices_->fits_after(need.devices, need.slots, freed);
}

}  // namespace pto::placement
