#include "report/device_stats.hpp"

#include <map>

#include "common/text.hpp"
#include "report/json_lines.hpp"

namespace pto::report {
namespace {

// A try that started on `d` and ended so (never cancelled: that one did not start).
void count(DeviceStats& d, JobStatus status)
{
    switch (status) {
    case JobStatus::passed:
    case JobStatus::flaky: ++d.passed; break;
    case JobStatus::failed: ++d.failed; break;
    case JobStatus::timeout: ++d.timeout; break;
    case JobStatus::killed: ++d.killed; break;
    case JobStatus::cancelled: return;
    }
    ++d.jobs;
}

std::string plural(int n, const char* word)
{
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

}  // namespace

std::string DeviceStats::name() const
{
    return node.empty() ? std::to_string(id) : node + ":" + std::to_string(id);
}

std::vector<DeviceStats> device_stats(const RunSummary& summary)
{
    std::map<std::pair<std::string, int>, DeviceStats> by_device;
    const auto at = [&by_device](const std::string& node, int id) -> DeviceStats& {
        DeviceStats& d = by_device[{node, id}];
        d.node = node;
        d.id = id;
        return d;
    };
    for (const auto& r : summary.results) {
        if (r.pid <= 0)
            continue;
        for (int id : r.devices)
            count(at(r.node, id), r.status);
        for (const auto& a : r.attempts)
            for (int id : a.devices)
                count(at(a.node, id), a.status);
    }
    for (int id : summary.sick)
        at({}, id).sick = true;
    for (const auto& d : summary.sick_on_nodes)
        at(d.node, d.id).sick = true;
    std::vector<DeviceStats> all;
    all.reserve(by_device.size());
    for (auto& [key, d] : by_device)
        all.push_back(std::move(d));
    return all;
}

std::string format_device_line(const DeviceStats& d)
{
    std::string line = "[pto-par] device " + text::printable(d.name()) + ": " + plural(d.jobs, "job") + ", " +
                       std::to_string(d.passed) + " passed, " + std::to_string(d.failed) + " failed, " +
                       std::to_string(d.timeout) + " timed out";
    if (d.killed > 0)
        line += ", " + std::to_string(d.killed) + " killed";
    if (d.sick)
        line += ", sick";
    return line + "\n";
}

std::string device_lines(const std::vector<DeviceStats>& all)
{
    std::string lines;
    for (const auto& d : all)
        if (d.saw_failure())
            lines += format_device_line(d);
    return lines;
}

std::string device_json(const DeviceStats& d)
{
    std::string o = "{\"record\":\"device\",\"device\":" + std::to_string(d.id);
    if (!d.node.empty())
        o += ",\"node\":" + json_string(d.node);
    o += ",\"jobs\":" + std::to_string(d.jobs) + ",\"passed\":" + std::to_string(d.passed) +
         ",\"failed\":" + std::to_string(d.failed) + ",\"timeout\":" + std::to_string(d.timeout) +
         ",\"killed\":" + std::to_string(d.killed) + ",\"sick\":" + (d.sick ? "true" : "false") + "}";
    return o;
}

std::vector<std::pair<std::string, std::string>> device_properties(const std::vector<DeviceStats>& all)
{
    std::vector<std::pair<std::string, std::string>> props;
    props.reserve(all.size() * 6);
    for (const auto& d : all) {
        const std::string key = "device." + d.name() + ".";
        props.emplace_back(key + "jobs", std::to_string(d.jobs));
        props.emplace_back(key + "passed", std::to_string(d.passed));
        props.emplace_back(key + "failed", std::to_string(d.failed));
        props.emplace_back(key + "timeout", std::to_string(d.timeout));
        props.emplace_back(key + "killed", std::to_string(d.killed));
        props.emplace_back(key + "sick", d.sick ? "true" : "false");
    }
    return props;
}

}  // namespace pto::report
