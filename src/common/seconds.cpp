#include "common/seconds.hpp"

#include <charconv>
#include <cmath>
#include <system_error>

namespace pto {

Expected<double> parse_seconds(std::string_view text, SecondsMin min)
{
    const bool allow_zero = min == SecondsMin::zero;
    const auto expected = [&] {
        return fail(std::string("expected a number of seconds ") + (allow_zero ? ">= 0" : "> 0") +
                    ", such as 600, 1.5 or 2e3");
    };
    // from_chars alone would take "inf", "nan" and "-1"; only a digit or a
    // dot may start a number of seconds.
    if (text.empty() || !((text.front() >= '0' && text.front() <= '9') || text.front() == '.'))
        return expected();
    double value = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value, std::chars_format::general);
    // Out of range is an overflow ("1e400"), never silently infinity.
    if (ec != std::errc{} || ptr != text.data() + text.size() || !std::isfinite(value))
        return expected();
    if (allow_zero ? value < 0 : value <= 0)
        return expected();
    return value;
}

}  // namespace pto
