#include "devices/port_pool.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace pto {

std::optional<std::pair<int, int>> parse_port_range(std::string_view text)
{
    const auto dash = text.find('-');
    if (dash == std::string_view::npos)
        return std::nullopt;
    int lo = 0;
    int hi = 0;
    const auto a = std::from_chars(text.data(), text.data() + dash, lo);
    const auto b = std::from_chars(text.data() + dash + 1, text.data() + text.size(), hi);
    if (a.ec != std::errc() || a.ptr != text.data() + dash || b.ec != std::errc() ||
        b.ptr != text.data() + text.size() || lo < 1 || hi > 65535 || lo > hi)
        return std::nullopt;
    return std::pair{lo, hi};
}

PortPool::PortPool(int low, int high) : low_(low), held_(high >= low ? static_cast<std::size_t>(high - low + 1) : 0)
{
}

std::optional<std::vector<int>> PortPool::acquire(std::size_t count, const std::function<bool(int)>& free_now)
{
    if (count == 0)
        return std::vector<int>{};
    std::size_t run = 0;
    for (std::size_t i = 0; i < held_.size(); ++i) {
        // Probing the machine only for ports we do not hold keeps the
        // search cheap: a taken port ends the run there.
        if (held_[i] || !free_now(low_ + static_cast<int>(i))) {
            run = 0;
            continue;
        }
        if (++run < count)
            continue;
        std::vector<int> ports;
        for (std::size_t j = i + 1 - count; j <= i; ++j) {
            held_[j] = true;
            ports.push_back(low_ + static_cast<int>(j));
        }
        return ports;
    }
    return std::nullopt;
}

void PortPool::release(std::span<const int> ports)
{
    for (int p : ports) {
        const long i = static_cast<long>(p) - low_;
        if (i < 0 || static_cast<std::size_t>(i) >= held_.size() || !held_[static_cast<std::size_t>(i)]) {
            std::fprintf(stderr, "pto-par: internal error: port %d released but not held\n", p);
            std::abort();
        }
        held_[static_cast<std::size_t>(i)] = false;
    }
}

void PortPool::withhold(std::span<const int> ports)
{
    withheld_ += ports.size();
}

}  // namespace pto
