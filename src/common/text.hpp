// Small text helpers shared by the parsers and the reporters.
#pragma once

#include <string>
#include <string_view>

namespace pto::text {

// Without leading and trailing blanks (space, tab, CR, LF, VT, FF).
std::string_view trim(std::string_view s);

// Valid UTF-8 as it is; C0 and C1 controls, DEL, bidi overrides and
// isolates, and bytes that are not UTF-8 as \xNN, byte by byte: text from
// outside (labels, environment values) can then never carry terminal escape
// sequences or reorder what a terminal shows.
std::string printable(std::string_view s);

// A word as a POSIX shell reads it back: as it is when it holds only
// characters no shell treats specially, else in single quotes.
std::string shell_word(std::string_view s);

// The columns a terminal gives text that printable() made: a column per
// code point, two for the East Asian wide and fullwidth ranges and emoji.
std::size_t columns(std::string_view printable_text);

// The longest start of `printable_text` that fits in `width` columns, cut
// between code points.
std::string_view cut_to_columns(std::string_view printable_text, std::size_t width);

// A shell variable name: [A-Za-z_][A-Za-z0-9_]*.
bool is_env_name(std::string_view s);

}  // namespace pto::text
