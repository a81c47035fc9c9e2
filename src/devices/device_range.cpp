#include <pto/devices.hpp>

#include <algorithm>
#include <charconv>

#include "common/text.hpp"

namespace pto {
namespace {

// A whole non-negative decimal number within [0, max_device_id], or nothing.
bool parse_id(std::string_view text, int& out)
{
    if (text.empty() || text.size() > 9)
        return false;
    if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return false;
    int value = 0;
    std::from_chars(text.data(), text.data() + text.size(), value);
    out = value;
    return true;
}

}  // namespace

Expected<std::vector<int>> parse_device_range(std::string_view spec)
{
    std::vector<int> ids;
    std::size_t start = 0;
    while (start <= spec.size()) {
        std::size_t comma = spec.find(',', start);
        if (comma == std::string_view::npos)
            comma = spec.size();
        const std::string_view part = text::trim(spec.substr(start, comma - start));
        start = comma + 1;
        if (part.empty())
            continue;

        const auto quoted = "'" + std::string(part) + "'";
        const auto dash = part.find('-');
        int lo = 0;
        int hi = 0;
        if (dash == std::string_view::npos) {
            if (!parse_id(part, lo))
                return fail("invalid device id " + quoted + ": expected a number from 0 to " +
                            std::to_string(max_device_id) + " or a range like 0-3");
            hi = lo;
        } else {
            const auto left = text::trim(part.substr(0, dash));
            const auto right = text::trim(part.substr(dash + 1));
            if (left.empty())
                return fail("invalid device range " + quoted + ": missing the first id (ids cannot be negative)");
            if (right.empty())
                return fail("invalid device range " + quoted + ": missing the last id");
            if (!parse_id(left, lo) || !parse_id(right, hi))
                return fail("invalid device range " + quoted + ": expected two numbers from 0 to " +
                            std::to_string(max_device_id) + " like 0-3");
            if (lo > hi)
                return fail("invalid device range " + quoted + ": the first id is greater than the last");
        }
        if (lo > max_device_id || hi > max_device_id)
            return fail("invalid device id in " + quoted + ": ids go up to " + std::to_string(max_device_id));
        for (int id = lo; id <= hi; ++id)
            ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
}

std::string format_device_list(std::span<const int> ids)
{
    std::vector<int> sorted(ids.begin(), ids.end());
    std::sort(sorted.begin(), sorted.end());
    std::string out;
    for (int id : sorted) {
        if (!out.empty())
            out += ',';
        out += std::to_string(id);
    }
    return out;
}

std::string format_device_range(std::span<const int> ids)
{
    std::vector<int> sorted(ids.begin(), ids.end());
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    if (sorted.size() >= 2 && sorted.back() - sorted.front() + 1 == static_cast<int>(sorted.size()))
        return std::to_string(sorted.front()) + "-" + std::to_string(sorted.back());
    return format_device_list(sorted);
}

}  // namespace pto
