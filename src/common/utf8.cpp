#include "common/utf8.hpp"

namespace pto::utf8 {

Sequence decode(std::string_view s)
{
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = byte(0);
    if (c < 0x80)
        return {1, c};
    int n = 0;
    char32_t cp = 0;
    // The second byte's range narrows for the lead bytes where the
    // shortest form, the surrogates or the U+10FFFF ceiling are at stake.
    unsigned char lo = 0x80;
    unsigned char hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else {
        return {};
    }
    for (int k = 1; k < n; ++k) {
        if (static_cast<std::size_t>(k) >= s.size())
            return {-1, 0};
        const unsigned char b = byte(static_cast<std::size_t>(k));
        if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf))
            return {};
        cp = (cp << 6) | (b & 0x3f);
    }
    return {n, cp};
}

}  // namespace pto::utf8
