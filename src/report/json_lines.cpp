#include "report/json_lines.hpp"

#include <cstdio>

#include "report/fd_writer.hpp"
#include "common/signal_names.hpp"
#include "common/utf8.hpp"

namespace pto::report {
namespace {

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
            if (const int n = utf8::decode(bytes.substr(i)).length; n > 0) {
                out.append(bytes.substr(i, static_cast<std::size_t>(n)));
                i += static_cast<std::size_t>(n);
                continue;
            }
            // Not UTF-8: the lone surrogate U+DC00+byte (Python's
            // "surrogateescape"), which the history reader turns back into
            // the byte, so a label survives the report exactly.
            std::snprintf(esc, sizeof esc, "\\udc%02x", c);
            out += esc;
        } else {
            out += static_cast<char>(c);
        }
        ++i;
    }
    out += '"';
    return out;
}

std::string job_json(const Job& job, const JobResult& r, bool with_node)
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
    // Under --launcher slurm only, so local reports stay as they were; null
    // for a job that never ran, as the other absent fields.
    if (with_node)
        o += ",\"node\":" + (r.node.empty() ? std::string("null") : json_string(r.node));
    const bool started = r.pid > 0;
    o += ",\"pid\":" + (started ? std::to_string(r.pid) : std::string("null"));
    o += ",\"start\":" + (r.start > 0 ? number(r.start) : std::string("null"));
    o += ",\"end\":" + (r.end > 0 ? number(r.end) : std::string("null"));
    o += ",\"duration_s\":" + (r.end > 0 ? number(r.duration_s) : std::string("null"));
    if (r.status == JobStatus::timeout && r.time_limit_s > 0)
        o += ",\"time_limit_s\":" + number(r.time_limit_s) + ",\"time_limit\":" +
             (r.run_time_limit ? "\"run\"" : "\"job\"");
    if (r.stragglers != 0)
        o += ",\"stragglers\":" + std::to_string(r.stragglers);
    if (!r.error.empty())
        o += ",\"error\":" + json_string(r.error);
    if (!r.attempts.empty()) {
        // Every try, the last one included, oldest first.
        const auto attempt = [](JobStatus status, const std::optional<int>& exit_code, int signal,
                                const std::vector<int>& devices, double start, double end, double duration) {
            std::string a = "{\"status\":\"" + std::string(to_string(status)) + "\"";
            a += ",\"exit_code\":" + (exit_code ? std::to_string(*exit_code) : std::string("null"));
            a += ",\"signal\":" + (signal != 0 ? json_string(signal_name(signal)) : std::string("null"));
            a += ",\"devices\":[";
            for (std::size_t i = 0; i < devices.size(); ++i)
                a += (i ? "," : "") + std::to_string(devices[i]);
            a += "],\"start\":" + number(start) + ",\"end\":" + number(end) + ",\"duration_s\":" + number(duration) +
                 "}";
            return a;
        };
        o += ",\"attempts\":[";
        // Under Slurm each try's node, whose GPUs its devices (and sick) are.
        const auto on_node = [with_node](std::string a, const std::string& node) {
            if (!with_node)
                return a;
            a.pop_back();
            return a + ",\"node\":" + (node.empty() ? std::string("null") : json_string(node)) + "}";
        };
        for (const auto& a : r.attempts) {
            o += on_node(attempt(a.status, a.exit_code, a.signal, a.devices, a.start, a.end, a.duration_s), a.node);
            if (!a.sick.empty()) {
                // Which of its devices the health check then found sick.
                o.pop_back();
                o += ",\"sick\":[";
                for (std::size_t i = 0; i < a.sick.size(); ++i)
                    o += (i ? "," : "") + std::to_string(a.sick[i]);
                o += "]}";
            }
            o += ",";
        }
        const JobStatus last = r.status == JobStatus::flaky ? JobStatus::passed : r.status;
        o += on_node(attempt(last, r.exit_code, r.signal, r.devices, r.start, r.end, r.duration_s), r.node) + "]";
    }
    o += "}";
    return o;
}

void JsonLines::write(const Job& job, const JobResult& r)
{
    if (!ok_)
        return;
    ok_ = write_all(fd_, job_json(job, r, with_node_) + "\n");
}

void JsonLines::write_kept(std::string_view lines)
{
    if (ok_ && !lines.empty())
        ok_ = write_all(fd_, lines);
}

void JsonLines::write_devices(const std::vector<DeviceStats>& devices)
{
    std::string lines;
    for (const auto& d : devices)
        lines += device_json(d) + "\n";
    if (ok_ && !lines.empty())
        ok_ = write_all(fd_, lines);
}

}  // namespace pto::report
