#include "common/text.hpp"

#include <algorithm>

#include "common/utf8.hpp"

namespace pto::text {
namespace {

// Code points that a terminal acts on or that reorder what is shown: C1
// controls, and the bidi embeddings, overrides and isolates that can make
// a label read as something else ("Trojan Source").
bool hidden_meaning(char32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

void put_hex(unsigned char c, std::string& out)
{
    static constexpr char hex[] = "0123456789abcdef";
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
}

}  // namespace

std::string_view trim(std::string_view s)
{
    constexpr std::string_view blank = " \t\r\n\v\f";
    const auto first = s.find_first_not_of(blank);
    if (first == std::string_view::npos)
        return {};
    return s.substr(first, s.find_last_not_of(blank) - first + 1);
}

bool is_env_name(std::string_view s)
{
    const auto letter = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
    return !s.empty() && letter(s.front()) &&
           std::all_of(s.begin(), s.end(), [&](char c) { return letter(c) || (c >= '0' && c <= '9'); });
}

std::string printable(std::string_view s)
{
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x20 || c == 0x7f) {
            put_hex(c, out);
            ++i;
            continue;
        }
        const utf8::Sequence seq = utf8::decode(s.substr(i));
        if (seq.length <= 0) {
            put_hex(c, out);
            ++i;
            continue;
        }
        const auto n = static_cast<std::size_t>(seq.length);
        if (hidden_meaning(seq.code_point))
            for (std::size_t k = 0; k < n; ++k)
                put_hex(static_cast<unsigned char>(s[i + k]), out);
        else
            out.append(s.substr(i, n));
        i += n;
    }
    return out;
}

}  // namespace pto::text
