#include "common/text.hpp"

#include <algorithm>
#include <utility>

#include "common/utf8.hpp"

namespace pto::text {

std::string shell_word(std::string_view s)
{
    const bool plain = !s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                         "0123456789@%+=:,./_-") == std::string_view::npos;
    if (plain)
        return std::string(s);
    std::string out = "'";
    for (const char c : s)
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}
namespace {

// Code points that a terminal acts on or that reorder what is shown: C1
// controls (U+0085 is a line break to some), the line and paragraph
// separators, and the bidi embeddings, overrides and isolates that can make
// a label read as something else ("Trojan Source").
bool hidden_meaning(char32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

void put_hex(unsigned char c, std::string& out)
{
    static constexpr char hex[] = "0123456789abcdef";
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
}

// East Asian Wide and Fullwidth (Unicode's EastAsianWidth.txt, the large
// blocks) and the emoji blocks: a terminal gives each of them two columns.
bool wide(char32_t cp)
{
    return (cp >= 0x1100 && cp <= 0x115f) || (cp >= 0x2e80 && cp <= 0x303e) || (cp >= 0x3041 && cp <= 0x33ff) ||
           (cp >= 0x3400 && cp <= 0x4dbf) || (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0xa000 && cp <= 0xa4cf) ||
           (cp >= 0xac00 && cp <= 0xd7a3) || (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0xfe30 && cp <= 0xfe4f) ||
           (cp >= 0xff00 && cp <= 0xff60) || (cp >= 0xffe0 && cp <= 0xffe6) || (cp >= 0x1f300 && cp <= 0x1f64f) ||
           (cp >= 0x1f900 && cp <= 0x1f9ff) || (cp >= 0x20000 && cp <= 0x3fffd);
}

// The next code point's bytes and columns; a byte that starts none (not
// made by printable()) counts as one column.
std::pair<std::size_t, std::size_t> next_glyph(std::string_view s)
{
    const utf8::Sequence seq = utf8::decode(s);
    if (seq.length <= 0)
        return {1, 1};
    return {static_cast<std::size_t>(seq.length), wide(seq.code_point) ? 2 : 1};
}

}  // namespace

std::size_t columns(std::string_view s)
{
    std::size_t n = 0;
    while (!s.empty()) {
        const auto [bytes, cols] = next_glyph(s);
        n += cols;
        s.remove_prefix(bytes);
    }
    return n;
}

std::string_view cut_to_columns(std::string_view s, std::size_t width)
{
    std::size_t used = 0, end = 0;
    while (end < s.size()) {
        const auto [bytes, cols] = next_glyph(s.substr(end));
        if (used + cols > width)
            break;
        used += cols;
        end += bytes;
    }
    return s.substr(0, end);
}

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
