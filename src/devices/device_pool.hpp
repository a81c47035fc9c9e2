// The free set of a run's devices and the allocation rule. Pure.
#pragma once

#include <optional>
#include <span>
#include <vector>

namespace pto {

class DevicePool {
public:
    explicit DevicePool(std::vector<int> ids);  // any order; duplicates merged

    std::size_t size() const { return ids_.size(); }
    std::size_t free_count() const { return free_count_; }
    std::span<const int> ids() const { return ids_; }

    // The lowest-numbered run of consecutive free ids that holds `count`
    // (pool 0,2-4, two wanted: 2,3); failing that, the lowest free ids.
    // Nothing when fewer than `count` are free. `count` 0 gets an empty set.
    std::optional<std::vector<int>> acquire(std::size_t count);

    // Returns ids taken by acquire(). Releasing an id that is not held is a
    // bug in the caller and aborts: the pool's whole point is that no id is
    // ever held twice.
    void release(std::span<const int> held);

    // Ids taken by acquire() that must never be handed out again in this
    // run (something of their last job could not be stopped): they stay
    // held, and count no more towards what a job can ever get.
    void withhold(std::span<const int> held);
    std::size_t usable() const { return ids_.size() - withheld_; }

private:
    std::size_t held_index(int id, const char* doing) const;

    std::vector<int> ids_;     // sorted
    std::vector<bool> free_;   // parallel to ids_
    std::size_t free_count_ = 0;
    std::size_t withheld_ = 0;
};

}  // namespace pto
