#include "slurm/step_checks.hpp"

#include <charconv>

namespace pto::slurm {
namespace {

std::string escape(std::string_view s)
{
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(s.size());
    for (const char c : s) {
        const auto b = static_cast<unsigned char>(c);
        if (b <= 0x20 || b == '\\' || b == 0x7f) {
            out += "\\x";
            out += hex[b >> 4];
            out += hex[b & 0xf];
        } else {
            out += c;
        }
    }
    return out;
}

Expected<std::string> unescape(std::string_view s)
{
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\\') {
            out += s[i];
            continue;
        }
        unsigned value = 0;
        const char* from = s.data() + i + 2;
        if (i + 4 > s.size() || s[i + 1] != 'x' ||
            std::from_chars(from, from + 2, value, 16).ptr != from + 2)
            return fail("bad escape in a check frame");
        out += static_cast<char>(value);
        i += 3;
    }
    return out;
}

}  // namespace

std::string format_check_frame(const CheckVerdict& v)
{
    std::string frame = std::string(step_check_marker) + std::to_string(v.gpu);
    if (v.why.empty())
        return frame + " ok\n";
    return frame + " sick " + escape(v.why) + " " + escape(v.output) + "\n";
}

Expected<CheckVerdict> parse_check_frame(std::string_view line)
{
    const auto bad = [line] { return fail("malformed check frame '" + std::string(line) + "'"); };
    CheckVerdict v;
    const auto space = line.find(' ');
    if (space == std::string_view::npos)
        return bad();
    const char* end = line.data() + space;
    if (std::from_chars(line.data(), end, v.gpu).ptr != end || v.gpu < 0)
        return bad();
    const std::string_view rest = line.substr(space + 1);
    if (rest == "ok")
        return v;
    if (!rest.starts_with("sick "))
        return bad();
    const std::string_view fields = rest.substr(5);
    const auto gap = fields.find(' ');
    if (gap == 0 || gap == std::string_view::npos)
        return bad();
    auto why = unescape(fields.substr(0, gap));
    auto output = unescape(fields.substr(gap + 1));
    if (!why || !output)
        return bad();
    v.why = std::move(*why);
    v.output = std::move(*output);
    return v;
}

}  // namespace pto::slurm
