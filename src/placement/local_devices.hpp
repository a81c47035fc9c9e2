// The devices of this machine given with -d, each with K slots
// (--device-slots): a whole-device job takes all the slots of the ids the
// pool's rule gives it; a job of S slots takes S of one device, beside
// other such jobs on it. No slot is held by two jobs, and a whole-device
// job shares its devices with nothing.
#pragma once

#include "devices/device_pool.hpp"
#include "placement/placement.hpp"

namespace pto::placement {

class LocalDevices final : public Devices {
public:
    explicit LocalDevices(std::vector<int> ids, std::size_t slots_per_device = 1);

    bool acquire(std::size_t count, std::size_t slots, Grant& grant) override;
    void release(const Grant& grant) override;
    bool withhold(const Grant& grant) override;
    // This machine is one place: what is lost is the grant's devices.
    bool lose(const Grant& grant) override;
    std::size_t usable() const override { return pool_.usable(); }
    bool fits_after(std::size_t count, std::size_t slots, std::span<const Grant* const> freed) const override;
    const char* scope() const override { return ""; }
    void set_aside(const Grant& grant, int id) override;
    void bring_back() override;

private:
    std::size_t index_of(int id) const;
    void give_back(int id, std::size_t slots);
    std::size_t taken(const Grant& grant) const { return grant.slots == 0 ? slots_ : grant.slots; }

    // Whole devices: those with no slot taken and not withheld are free
    // here, and handed out by its rule.
    DevicePool pool_;
    std::size_t slots_;
    std::vector<std::size_t> used_;  // slots taken, parallel to pool_.ids()
    std::vector<bool> withheld_;     // parallel to pool_.ids()
    std::vector<int> aside_;         // held from the pool while another run leases them
};

}  // namespace pto::placement
