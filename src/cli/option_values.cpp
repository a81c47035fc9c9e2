#include "cli/option_values.hpp"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "common/seconds.hpp"

namespace pto::cli {

Expected<double> parse_seconds_option(const char* opt, const char* text, bool allow_zero)
{
    auto v = parse_seconds(text, allow_zero ? SecondsMin::zero : SecondsMin::above_zero);
    if (!v)
        return fail(std::string("invalid value '") + text + "' for " + opt + ": " + v.error().message);
    return v;
}

Expected<std::size_t> parse_jobs(const char* text)
{
    if (std::strcmp(text, "auto") == 0)
        return 0;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(text, &end, 10);
    if (*text == '\0' || *end != '\0' || errno != 0 || v < 1 || v > 100000)
        return fail(std::string("invalid value '") + text + "' for --jobs: expected a whole number >= 1 or 'auto'");
    return static_cast<std::size_t>(v);
}

Expected<report::OutputMode> parse_output(const char* text)
{
    const std::string_view t = text;
    if (t == "group")
        return report::OutputMode::group;
    if (t == "stream")
        return report::OutputMode::stream;
    if (t == "failed")
        return report::OutputMode::failed;
    if (t == "none")
        return report::OutputMode::none;
    return fail("invalid value '" + std::string(t) + "' for --output: expected group, stream, failed or none");
}

Expected<std::string> one_of(std::string_view text, const char* option, std::initializer_list<std::string_view> words)
{
    std::string list;
    std::size_t i = 0;
    for (const auto w : words) {
        if (text == w)
            return std::string(text);
        list += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ");
        list += w;
        ++i;
    }
    return fail("invalid value '" + std::string(text) + "' for " + option + ": expected " + list);
}

Expected<std::uint64_t> parse_bytes(std::string_view text, const char* option)
{
    std::uint64_t v = 0;
    const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
    std::string_view unit = text.substr(static_cast<std::size_t>(r.ptr - text.data()));
    int shift = 0;
    if (unit == "K")
        shift = 10;
    else if (unit == "M")
        shift = 20;
    else if (unit == "G")
        shift = 30;
    else if (!unit.empty())
        shift = -1;
    if (text.empty() || r.ec != std::errc() || shift < 0 || v > (std::uint64_t{1} << 40) >> shift)
        return fail("invalid value '" + std::string(text) + "' for " + option +
                    ": expected a number of bytes up to 1T, optionally with K, M or G, e.g. 4M");
    return v << shift;
}

Expected<bool> parse_launcher(std::string_view text, const char* where)
{
    if (text == "local")
        return false;
    if (text == "slurm")
        return true;
    return fail("invalid value '" + std::string(text) + "' for " + where + ": expected local or slurm");
}

}  // namespace pto::cli
