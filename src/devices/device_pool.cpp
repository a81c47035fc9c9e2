#include "devices/device_pool.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace pto {

DevicePool::DevicePool(std::vector<int> ids) : ids_(std::move(ids))
{
    std::sort(ids_.begin(), ids_.end());
    ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
    free_.assign(ids_.size(), true);
    free_count_ = ids_.size();
}

std::optional<std::vector<int>> DevicePool::acquire(std::size_t count)
{
    if (count > free_count_)
        return std::nullopt;
    std::vector<int> got;
    got.reserve(count);
    if (count == 0)
        return got;

    std::size_t run_start = 0;
    std::size_t run_len = 0;
    for (std::size_t i = 0; i < ids_.size(); ++i) {
        if (!free_[i]) {
            run_len = 0;
            continue;
        }
        if (run_len == 0 || ids_[i] != ids_[i - 1] + 1)
            run_start = i, run_len = 0;
        if (++run_len == count) {
            for (std::size_t k = run_start; k <= i; ++k)
                free_[k] = false, got.push_back(ids_[k]);
            free_count_ -= count;
            return got;
        }
    }
    for (std::size_t i = 0; i < ids_.size() && got.size() < count; ++i)
        if (free_[i])
            free_[i] = false, got.push_back(ids_[i]);
    free_count_ -= count;
    return got;
}

// Where `id` is in ids_; it must be one acquire() handed out. Anything else
// is a bug in the caller, and aborts: the pool's whole point is that no id
// is ever held twice.
std::size_t DevicePool::held_index(int id, const char* doing) const
{
    const auto it = std::lower_bound(ids_.begin(), ids_.end(), id);
    const auto i = static_cast<std::size_t>(it - ids_.begin());
    if (it == ids_.end() || *it != id || free_[i]) {
        std::fprintf(stderr, "pto-par: internal error: device %d %s but not held\n", id, doing);
        std::abort();
    }
    return i;
}

void DevicePool::release(std::span<const int> held)
{
    for (int id : held) {
        free_[held_index(id, "released")] = true;
        ++free_count_;
    }
}

void DevicePool::withhold(std::span<const int> held)
{
    for (int id : held)
        (void)held_index(id, "withheld");  // checked only: it stays held
    withheld_ += held.size();
}

}  // namespace pto
