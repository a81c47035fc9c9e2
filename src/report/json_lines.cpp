#include "report/json_lines.hpp"

#include <cstdio>

#include "report/fd_writer.hpp"
#include "common/signal_names.hpp"

namespace pto::report {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if it is not one.
std::size_t utf8_length(std::string_view s, std::size_t i)
{
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = b(i);
    std::size_t n = 0;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4;
    else
        return 0;
    if (i + n > s.size())
        return 0;
    for (std::size_t k = 1; k < n; ++k)
        if ((b(i + k) & 0xc0) != 0x80)
            return 0;
    // Overlong forms, surrogates and code points past U+10FFFF.
    if (c == 0xe0 && b(i + 1) < 0xa0)
        return 0;
    if (c == 0xed && b(i + 1) >= 0xa0)
        return 0;
    if (c == 0xf0 && b(i + 1) < 0x90)
        return 0;
    if (c == 0xf4 && b(i + 1) >= 0x90)
        return 0;
    return n;
}

std::string number(double v)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6f", v);
    return buf;
}

}  // namespace

std::string json_string(std::string_view bytes)
{
    std::string out = "\"";
    char esc[8];
    for (std::size_t i = 0; i < bytes.size();) {
        const unsigned char c = static_cast<unsigned char>(bytes[i]);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c < 0x20 || c == 0x7f) {
            std::snprintf(esc, sizeof esc, "\\u%04x", c);
            out += esc;
        } else if (c >= 0x80) {
            if (const std::size_t n = utf8_length(bytes, i); n != 0) {
                out.append(bytes.substr(i, n));
                i += n;
                continue;
            }
            std::snprintf(esc, sizeof esc, "\\u%04x", c);
            out += esc;
        } else {
            out += static_cast<char>(c);
        }
        ++i;
    }
    out += '"';
    return out;
}

std::string job_json(const Job& job, const JobResult& r)
{
    std::string o = "{\"label\":" + json_string(r.label);
    o += ",\"seq\":" + std::to_string(job.seq);
    o += ",\"line\":" + std::to_string(job.line);
    o += ",\"command\":" + json_string(job.command);
    o += ",\"status\":\"" + std::string(to_string(r.status)) + "\"";
    o += ",\"exit_code\":" + (r.exit_code ? std::to_string(*r.exit_code) : std::string("null"));
    o += ",\"signal\":" + (r.signal != 0 ? json_string(signal_name(r.signal)) : std::string("null"));
    o += ",\"devices\":[";
    for (std::size_t i = 0; i < r.devices.size(); ++i)
        o += (i ? "," : "") + std::to_string(r.devices[i]);
    o += "]";
    const bool started = r.pid > 0;
    o += ",\"pid\":" + (started ? std::to_string(r.pid) : std::string("null"));
    o += ",\"start\":" + (r.start > 0 ? number(r.start) : std::string("null"));
    o += ",\"end\":" + (r.end > 0 ? number(r.end) : std::string("null"));
    o += ",\"duration_s\":" + (r.end > 0 ? number(r.duration_s) : std::string("null"));
    if (r.stragglers != 0)
        o += ",\"stragglers\":" + std::to_string(r.stragglers);
    if (!r.error.empty())
        o += ",\"error\":" + json_string(r.error);
    o += "}";
    return o;
}

void JsonLines::write(const Job& job, const JobResult& r)
{
    if (!ok_)
        return;
    ok_ = write_all(fd_, job_json(job, r) + "\n");
}

}  // namespace pto::report
