#include "placement/local_devices.hpp"

#include <algorithm>
#include <optional>

namespace pto::placement {

LocalDevices::LocalDevices(std::vector<int> ids, std::size_t slots_per_device)
    : pool_(std::move(ids)), slots_(std::max<std::size_t>(1, slots_per_device)), used_(pool_.size(), 0),
      withheld_(pool_.size(), false)
{
}

std::size_t LocalDevices::index_of(int id) const
{
    const auto ids = pool_.ids();
    return static_cast<std::size_t>(std::lower_bound(ids.begin(), ids.end(), id) - ids.begin());
}

bool LocalDevices::acquire(std::size_t count, std::size_t slots, Grant& grant)
{
    if (slots == 0) {
        auto ids = pool_.acquire(count);
        if (!ids)
            return false;
        for (int id : *ids)
            used_[index_of(id)] = slots_;
        grant.devices = std::move(*ids);
        grant.device_count = count;
        return true;
    }
    if (slots > slots_)
        return false;
    // The fullest device that still has room, so that whole devices stay
    // free for whole-device jobs; else the lowest free one.
    std::optional<std::size_t> best;
    for (std::size_t i = 0; i < used_.size(); ++i)
        if (!withheld_[i] && used_[i] > 0 && used_[i] + slots <= slots_ && (!best || used_[i] > used_[*best]))
            best = i;
    if (!best) {
        auto ids = pool_.acquire(1);
        if (!ids)
            return false;
        best = index_of(ids->front());
    }
    used_[*best] += slots;
    grant.devices = {pool_.ids()[*best]};
    grant.device_count = 1;
    grant.slots = slots;
    return true;
}

void LocalDevices::give_back(int id, std::size_t slots)
{
    const std::size_t i = index_of(id);
    used_[i] -= slots;
    // A withheld device stays held by the pool for good.
    if (used_[i] == 0 && !withheld_[i])
        pool_.release(std::span<const int>(&id, 1));
}

void LocalDevices::release(const Grant& grant)
{
    for (int id : grant.devices)
        give_back(id, taken(grant));
}

// No job of this run is on `id` (its lease would be ours): its slots go
// back, and the pool keeps it taken.
void LocalDevices::set_aside(const Grant& grant, int id)
{
    for (int d : grant.devices) {
        if (d != id) {
            give_back(d, taken(grant));
            continue;
        }
        used_[index_of(d)] -= taken(grant);
        aside_.push_back(d);
    }
}

void LocalDevices::bring_back()
{
    for (int id : aside_)
        pool_.release(std::span<const int>(&id, 1));
    aside_.clear();
}

bool LocalDevices::withhold(const Grant& grant)
{
    for (int id : grant.devices) {
        const std::size_t i = index_of(id);
        if (withheld_[i])
            continue;  // another job sharing its slots was stopped the same way
        withheld_[i] = true;
        pool_.withhold(std::span<const int>(&id, 1));
    }
    return false;  // the other devices are as good as before
}

bool LocalDevices::lose(const Grant& grant)
{
    const bool fresh = std::any_of(grant.devices.begin(), grant.devices.end(),
                                   [this](int id) { return !withheld_[index_of(id)]; });
    (void)withhold(grant);  // false here: the pool has no CPUs to run out of
    return fresh;
}

bool LocalDevices::fits_after(std::size_t count, std::size_t slots, std::span<const Grant* const> freed) const
{
    auto used = used_;
    for (const Grant* g : freed)
        for (int id : g->devices)
            used[index_of(id)] -= taken(*g);
    std::size_t whole = 0;
    for (std::size_t i = 0; i < used.size(); ++i) {
        if (withheld_[i])
            continue;
        if (slots > 0 && used[i] + slots <= slots_)
            return true;
        whole += used[i] == 0 ? 1 : 0;
    }
    return slots == 0 && whole >= count;
}

}  // namespace pto::placement
