// One reading of "a number of seconds" for the command line and the
// commands file alike, so that a value one accepts the other does too.
#pragma once

#include <string_view>

#include <pto/error.hpp>

namespace pto {

enum class SecondsMin { above_zero, zero };

// A plain decimal number with an optional exponent: "600", "1.5", ".5",
// "2e3". No sign, hexadecimal, infinity, NaN or blanks. The error message
// says what was expected, for the caller to prefix with what was wrong.
Expected<double> parse_seconds(std::string_view text, SecondsMin min = SecondsMin::above_zero);

}  // namespace pto
