#include "slurm/allocation.hpp"

#include <pto/devices.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string>

namespace pto::slurm {
namespace {

bool parse_number(std::string_view s, long& out)
{
    if (s.empty())
        return false;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size() && out >= 0;
}

// Splits at the commas that are not inside brackets.
std::vector<std::string_view> split_top_level(std::string_view s)
{
    std::vector<std::string_view> parts;
    int depth = 0;
    std::size_t from = 0;
    for (std::size_t i = 0; i <= s.size(); ++i) {
        if (i == s.size() || (s[i] == ',' && depth == 0)) {
            if (i > from)
                parts.push_back(s.substr(from, i - from));
            from = i + 1;
        } else if (s[i] == '[') {
            ++depth;
        } else if (s[i] == ']') {
            --depth;
        }
    }
    return parts;
}

// One "prefix[ranges]rest" name; `rest` may hold more brackets.
Expected<void> expand_one(std::string_view name, std::vector<std::string>& out)
{
    const auto open = name.find('[');
    if (open == std::string_view::npos) {
        out.emplace_back(name);
        return {};
    }
    const auto close = name.find(']', open);
    if (close == std::string_view::npos)
        return fail("unbalanced '[' in host list '" + std::string(name) + "'");
    const std::string_view prefix = name.substr(0, open);
    const std::string_view rest = name.substr(close + 1);
    std::string_view ranges = name.substr(open + 1, close - open - 1);
    while (!ranges.empty()) {
        const auto comma = ranges.find(',');
        const std::string_view range = ranges.substr(0, comma);
        ranges = comma == std::string_view::npos ? std::string_view() : ranges.substr(comma + 1);
        const auto dash = range.find('-');
        const std::string_view lo_text = range.substr(0, dash);
        const std::string_view hi_text = dash == std::string_view::npos ? lo_text : range.substr(dash + 1);
        long lo = 0;
        long hi = 0;
        if (!parse_number(lo_text, lo) || !parse_number(hi_text, hi) || hi < lo || hi - lo > 100000)
            return fail("bad range '" + std::string(range) + "' in host list '" + std::string(name) + "'");
        for (long i = lo; i <= hi; ++i) {
            std::string digits = std::to_string(i);
            if (digits.size() < lo_text.size())
                digits.insert(0, lo_text.size() - digits.size(), '0');
            if (auto ok = expand_one(std::string(prefix) + digits + std::string(rest), out); !ok)
                return ok;
        }
    }
    return {};
}

// The value of `key=` in a line of space-separated fields, empty if absent.
std::string_view field(std::string_view line, std::string_view key)
{
    std::size_t at = 0;
    while ((at = line.find(key, at)) != std::string_view::npos) {
        if (at == 0 || line[at - 1] == ' ') {
            const auto from = at + key.size();
            return line.substr(from, line.find(' ', from) - from);
        }
        at += key.size();
    }
    return {};
}

// The GPU indices of a GRES field: "gpu:2(IDX:0-1)", "gpu:a100:2(IDX:0,2)",
// or several entries "gpu:1(IDX:0),shard:0(...)"; other kinds are left out.
Expected<std::vector<int>> gpu_ids(std::string_view gres)
{
    std::vector<int> ids;
    std::size_t at = 0;
    while ((at = gres.find("gpu", at)) != std::string_view::npos) {
        if (at != 0 && gres[at - 1] != ',') {
            at += 3;
            continue;
        }
        const auto idx = gres.find("(IDX:", at);
        if (idx == std::string_view::npos)
            break;
        const auto close = gres.find(')', idx);
        if (close == std::string_view::npos)
            return fail("unterminated IDX in GRES '" + std::string(gres) + "'");
        const std::string_view list = gres.substr(idx + 5, close - idx - 5);
        if (list != "N/A") {
            auto parsed = parse_device_range(list);
            if (!parsed)
                return fail("GRES '" + std::string(gres) + "': " + parsed.error().message);
            ids.insert(ids.end(), parsed->begin(), parsed->end());
        }
        at = close;
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
}

}  // namespace

Expected<std::vector<std::string>> expand_hostlist(std::string_view list)
{
    std::vector<std::string> names;
    for (const auto part : split_top_level(list))
        if (auto ok = expand_one(part, names); !ok)
            return tl::unexpected(ok.error());
    return names;
}

Expected<std::vector<NodeDevices>> parse_job_details(std::string_view text)
{
    std::vector<NodeDevices> nodes;
    while (!text.empty()) {
        const auto nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
        line.remove_prefix(std::min(line.find_first_not_of(' '), line.size()));
        // The per-node lines are the ones that start with "Nodes=" and
        // carry CPU_IDs; "NodeList=" and "NumNodes=" are the job's.
        if (!line.starts_with("Nodes=") || field(line, "CPU_IDs=").empty())
            continue;
        auto names = expand_hostlist(field(line, "Nodes="));
        if (!names)
            return tl::unexpected(names.error());
        auto ids = gpu_ids(field(line, "GRES="));
        if (!ids)
            return tl::unexpected(ids.error());
        auto cpus = parse_device_range(field(line, "CPU_IDs="));
        if (!cpus)
            return fail("CPU_IDs '" + std::string(field(line, "CPU_IDs=")) + "': " + cpus.error().message);
        for (auto& name : *names)
            nodes.push_back({std::move(name), *ids, cpus->size()});
    }
    if (nodes.empty())
        return fail("no node lines (Nodes=... CPU_IDs=...) in the job's details");
    return nodes;
}

Expected<StepHeader> parse_step_header(std::string_view line)
{
    StepHeader h;
    const auto a = line.find(' ');
    const auto b = a == std::string_view::npos ? a : line.find(' ', a + 1);
    if (b == std::string_view::npos)
        return fail("malformed step header '" + std::string(line) + "'");
    h.step = line.substr(0, a);
    h.node = line.substr(a + 1, b - a - 1);
    const std::string_view gpus = line.substr(b + 1);
    if (h.step.empty() || h.node.empty())
        return fail("malformed step header '" + std::string(line) + "'");
    if (!gpus.empty()) {
        auto ids = parse_device_range(gpus);
        if (!ids)
            return fail("step header: GPUs '" + std::string(gpus) + "': " + ids.error().message);
        h.gpus = std::move(*ids);
    }
    return h;
}

Expected<StepEnd> parse_step_end(std::string_view line)
{
    StepEnd e;
    const std::string text(line);  // sscanf wants the NUL that a view lacks
    char extra = 0;
    if (std::sscanf(text.c_str(), "%d %d%c", &e.wait_status, &e.leftovers, &extra) != 2 || e.leftovers < 0)
        return fail("malformed step end '" + text + "'");
    return e;
}

}  // namespace pto::slurm
