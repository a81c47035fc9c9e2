#include "common/text.hpp"

namespace pto::text {

std::string_view trim(std::string_view s)
{
    constexpr std::string_view blank = " \t\r\n\v\f";
    const auto first = s.find_first_not_of(blank);
    if (first == std::string_view::npos)
        return {};
    return s.substr(first, s.find_last_not_of(blank) - first + 1);
}

std::string printable(std::string_view s)
{
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(s.size());
    for (const unsigned char c : s) {
        if (c < 0x20 || c >= 0x7f) {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

}  // namespace pto::text
