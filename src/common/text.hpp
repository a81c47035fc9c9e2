// Small text helpers shared by the parsers and the reporters.
#pragma once

#include <string>
#include <string_view>

namespace pto::text {

// Without leading and trailing blanks (space, tab, CR, LF, VT, FF).
std::string_view trim(std::string_view s);

// Control characters and bytes >= 0x7f as \xNN: text from outside (labels,
// environment values) can then never carry terminal escape sequences.
std::string printable(std::string_view s);

}  // namespace pto::text
