// Device-id ranges as written on command lines: "0", "0-3", "0,2-4,7".
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <pto/error.hpp>

namespace pto {

// Ids above this are rejected: no accelerator runtime numbers devices past it,
// and it keeps a typo like "0-99999999" from allocating a huge pool.
inline constexpr int max_device_id = 65535;

// Parses a comma-separated list of ids and inclusive ranges. Whitespace around
// parts is trimmed, empty parts are ignored, duplicates are merged; the result
// is sorted. The error names the offending part ("3-1", "-2", "a", "1-").
Expected<std::vector<int>> parse_device_range(std::string_view spec);

// The inverse, in the form accelerator tools accept: "" for none, "4" for one
// id, "0-3" when all ids are consecutive, else "0,2,5". Input order and
// duplicates do not matter.
std::string format_device_range(std::span<const int> ids);

// Always comma-separated: "0,1,2,3".
std::string format_device_list(std::span<const int> ids);

}  // namespace pto
