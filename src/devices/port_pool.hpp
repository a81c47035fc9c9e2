// The range of TCP ports jobs draw from, as devices are drawn from their
// pool: no port held by two running jobs. Pure; whether a port is free on
// the machine is asked of the caller.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace pto {

// "LO-HI" with 1 <= LO <= HI <= 65535, as --ports and $PTO_PAR_PORTS give
// a range; nothing for anything else.
std::optional<std::pair<int, int>> parse_port_range(std::string_view text);

class PortPool {
public:
    PortPool(int low, int high);  // inclusive; empty when low > high

    std::size_t size() const { return held_.size(); }
    std::size_t usable() const { return held_.size() - withheld_; }

    // The lowest run of `count` consecutive ports that no job holds and
    // that `free_now` says nothing else uses. Nothing when there is none.
    std::optional<std::vector<int>> acquire(std::size_t count, const std::function<bool(int)>& free_now);
    void release(std::span<const int> ports);
    // Never handed out again in this run (their job could not be stopped).
    void withhold(std::span<const int> ports);

private:
    int low_;
    std::vector<bool> held_;
    std::size_t withheld_ = 0;
};

}  // namespace pto
