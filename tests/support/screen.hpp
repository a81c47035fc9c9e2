// What a terminal shows after a program's output, for the tests of the
// progress line: enough of a VT100 for what pto-par writes (text with
// autowrap, CR, LF, ESC[K, ESC[...m), so a test can check the final screen
// the way a user would see it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pto::test {

struct Screen {
    // Every row written, scrollback too; without trailing blanks, and
    // without the empty rows at the end.
    std::vector<std::string> rows;
    int wraps = 0;                  // times text ran past the last column onto the next row
    std::vector<std::string> unknown;  // escape sequences this emulator does not know
};

// `bytes` as read from a pseudo-terminal's master (LF already CR LF) on a
// terminal `cols` columns wide. A UTF-8 code point takes one column.
Screen render(std::string_view bytes, std::size_t cols);

// Each drawing of the progress line in `bytes`: the text between a CR and
// the ESC[K that ends it (an erase, CR ESC[K, draws nothing and is left out).
std::vector<std::string> progress_draws(std::string_view bytes);

// Columns of UTF-8 text, a column per code point.
std::size_t columns(std::string_view text);

}  // namespace pto::test
