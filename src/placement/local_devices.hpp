// The devices of this machine given with -d: ids from one pool, by its
// allocation rule.
#pragma once

#include "devices/device_pool.hpp"
#include "placement/placement.hpp"

namespace pto::placement {

class LocalDevices final : public Devices {
public:
    explicit LocalDevices(std::vector<int> ids) : pool_(std::move(ids)) {}

    bool acquire(std::size_t count, Grant& grant) override;
    void release(const Grant& grant) override { pool_.release(grant.devices); }
    void withhold(const Grant& grant) override { pool_.withhold(grant.devices); }
    std::size_t usable() const override { return pool_.usable(); }
    bool fits_after(std::size_t count, std::span<const Grant* const> freed) const override;
    const char* scope() const override { return ""; }

private:
    DevicePool pool_;
};

}  // namespace pto::placement
