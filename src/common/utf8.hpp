// The one UTF-8 decoder of the project: status lines, JSON and XML all
// decide the same way which bytes are text.
#pragma once

#include <string_view>

namespace pto::utf8 {

struct Sequence {
    // > 0: a valid, complete sequence of that many bytes;
    //   0: s[0] cannot start one (a stray continuation byte, 0xc0, 0xf5...);
    //  -1: s is a valid beginning cut short (more bytes may complete it).
    int length = 0;
    char32_t code_point = 0;  // when length > 0
};

// The sequence at the start of `s` (non-empty). Overlong forms, surrogates
// and code points past U+10FFFF are invalid, as RFC 3629 says.
Sequence decode(std::string_view s);

}  // namespace pto::utf8
