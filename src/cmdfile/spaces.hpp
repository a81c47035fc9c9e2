// What separates words in a commands file: blanks, not line breaks.
#pragma once

#include <cstddef>
#include <string_view>

namespace pto::cmdfile {

inline bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

// The index of the first byte at or after `i` that is not a blank.
inline std::size_t skip_spaces(std::string_view s, std::size_t i) {
    while (i < s.size() && is_space(s[i])) ++i;
    return i;
}

}  // namespace pto::cmdfile
