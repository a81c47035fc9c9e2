#include "plan/plan.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <numeric>
#include <optional>
#include <set>
#include <string_view>

#include <pto/scheduler.hpp>

#include "common/read_file.hpp"
#include "plan/json_value.hpp"

namespace pto::plan {
namespace {

// A history file is a report of one run: this bounds what a wrong path
// (a disk image, /dev/zero) can make pto-par read.
constexpr std::size_t max_report_bytes = 256u << 20;

// The report at `path`; nothing when there is no such file.
Expected<std::optional<std::string>> read_report(const std::string& path)
{
    auto text = read_file(path, max_report_bytes, "history file '" + path + "'");
    if (text)
        return std::optional<std::string>(std::move(*text));
    if (text.error().sys_errno == ENOENT)
        return std::optional<std::string>();
    if (text.error().sys_errno == E2BIG)
        return fail("history file '" + path + "' is larger than " + std::to_string(max_report_bytes >> 20) +
                    " MiB; is it a --json report?");
    return tl::unexpected(text.error());
}

}  // namespace

namespace {

// Longer than any run: a bigger number is no measured duration, and would
// outweigh every other job in the order and the shards.
constexpr double max_duration_s = 1e9;

bool known_status(std::string_view s)
{
    for (JobStatus st : {JobStatus::passed, JobStatus::failed, JobStatus::timeout, JobStatus::killed,
                         JobStatus::cancelled, JobStatus::flaky})
        if (s == to_string(st))
            return true;
    return false;
}

// Adds the record `v` to `history` when it is a job's; says why not when it
// says nothing usable. A record of another kind is no error.
std::optional<std::string> add_record(History& history, const JsonValue& v, std::size_t& used)
{
    const JsonObject* obj = v.object();
    if (obj == nullptr)
        return "not a JSON object";
    // A device's record (or any kind but a job's) says nothing of a label.
    if (const auto record = obj->find("record");
        record != obj->end() && !(record->second.string() != nullptr && *record->second.string() == "job"))
        return std::nullopt;
    const auto label = obj->find("label");
    const auto status = obj->find("status");
    if (label == obj->end() || label->second.string() == nullptr || status == obj->end() ||
        status->second.string() == nullptr)
        return "no \"label\" and \"status\"";
    if (!known_status(*status->second.string()))
        return "unknown status \"" + *status->second.string() + "\"";
    const auto d = obj->find("duration_s");
    const double* duration = d == obj->end() ? nullptr : d->second.number();
    if (duration != nullptr && !(*duration >= 0 && *duration <= max_duration_s))
        return "\"duration_s\" is not a duration of 0 to 1e9 seconds";
    Past& past = history[*label->second.string()];
    past.status = *status->second.string();
    const auto command = obj->find("command");
    past.command = command != obj->end() && command->second.string() != nullptr ? *command->second.string()
                                                                                : std::string();
    // A job that never ran (cancelled) says nothing of how long it takes:
    // what an earlier run measured stays.
    if (duration != nullptr)
        past.duration_s = *duration;
    ++used;
    return std::nullopt;
}

}  // namespace

ReportRead add_report(History& history, std::string_view text, const std::string& name)
{
    ReportRead read;
    std::size_t line_no = 0;
    while (!text.empty()) {
        const auto nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
        ++line_no;
        if (line.find_first_not_of(" \t\r") == std::string_view::npos)
            continue;
        auto v = parse_json(line);
        if (!v && nl == std::string_view::npos) {
            read.cut_off = true;
            break;
        }
        const auto why = v ? add_record(history, *v, read.used)
                           : std::optional<std::string>("not a JSON object: " + v.error().message);
        if (why && read.ignored++ == 0)
            read.first_ignored = name + ":" + std::to_string(line_no) + ": " + *why;
    }
    return read;
}

namespace {

// A cut-off last line (a run stopped while writing it) and records that say
// nothing usable are ignored, said in `notes`: a bad record costs the order
// and the shards its job's duration, never the run. A file with no job's
// record at all is no report (the commands file given by mistake).
Expected<void> add_report_file(History& history, std::string_view text, const std::string& name,
                               std::vector<std::string>& notes)
{
    const ReportRead read = add_report(history, text, name);
    if (read.ignored > 0 && read.used == 0)
        return fail(read.first_ignored + "; history files are --json reports");
    if (read.cut_off)
        notes.push_back("history file '" + name +
                        "': its last line was cut off (a run stopped while writing it?); that line is ignored");
    if (read.ignored == 1)
        notes.push_back("history file '" + name + "': a record is ignored: " + read.first_ignored);
    else if (read.ignored > 1)
        notes.push_back("history file '" + name + "': " + std::to_string(read.ignored) +
                        " records are ignored; the first: " + read.first_ignored);
    return {};
}

}  // namespace

Expected<History> read_history(std::span<const std::string> files, std::vector<std::string>& notes)
{
    History history;
    for (const auto& f : files) {
        auto text = read_report(f);
        if (!text)
            return tl::unexpected(text.error());
        if (!*text)
            continue;
        if (auto ok = add_report_file(history, **text, f, notes); !ok)
            return tl::unexpected(ok.error());
    }
    return history;
}

Expected<LastRun> read_last_run(const std::string& file, std::vector<std::string>& notes)
{
    auto text = read_report(file);
    if (!text)
        return tl::unexpected(text.error());
    if (!*text)
        return fail("--rerun-failed: no report '" + file + "'; it names the --json report of the run to repeat");
    LastRun last;
    if (auto ok = add_report_file(last.history, **text, file, notes); !ok)
        return tl::unexpected(ok.error());
    last.text = std::move(**text);
    return last;
}

std::string last_records(std::string_view text, std::span<const std::string> labels)
{
    const std::set<std::string_view> wanted(labels.begin(), labels.end());
    // Label -> the start of its last record's line in `text`.
    std::map<std::string, std::size_t, std::less<>> last;
    for (std::size_t at = 0; at < text.size();) {
        const auto nl = text.find('\n', at);
        // A cut-off last line is no record (add_report says so).
        if (nl == std::string_view::npos)
            break;
        const std::string_view line = text.substr(at, nl - at);
        History one;
        std::size_t used = 0;
        if (const auto v = parse_json(line); v && !add_record(one, *v, used) && used == 1 &&
                                             wanted.count(one.begin()->first) != 0)
            last[one.begin()->first] = at;
        at = nl + 1;
    }
    std::vector<std::size_t> starts;
    starts.reserve(last.size());
    for (const auto& [label, start] : last)
        starts.push_back(start);
    std::sort(starts.begin(), starts.end());
    std::string out;
    for (const std::size_t start : starts)
        out += text.substr(start, text.find('\n', start) + 1 - start);
    return out;
}

Expected<Shard> parse_shard(std::string_view text)
{
    const auto slash = text.find('/');
    const auto bad = [&] { return fail("invalid value '" + std::string(text) + "' for --shard: expected K/N with 1 <= K <= N, e.g. 2/4"); };
    if (slash == std::string_view::npos)
        return bad();
    Shard s;
    const auto k = std::from_chars(text.data(), text.data() + slash, s.k);
    const auto n = std::from_chars(text.data() + slash + 1, text.data() + text.size(), s.n);
    if (k.ec != std::errc() || k.ptr != text.data() + slash || n.ec != std::errc() ||
        n.ptr != text.data() + text.size() || s.k < 1 || s.n < 1 || s.k > s.n)
        return bad();
    return s;
}

std::vector<History::const_iterator> match_history(std::span<const cmdfile::JobSpec> specs, const History& history,
                                                   std::vector<std::string>* changed)
{
    std::vector<History::const_iterator> out(specs.size(), history.end());
    // Command -> its one record (end() when several ran it), made only once
    // a label has no record of its command.
    std::optional<std::map<std::string_view, History::const_iterator>> by_command;
    for (std::size_t i = 0; i < specs.size(); ++i) {
        const auto it = history.find(specs[i].label);
        if (it != history.end() && (it->second.command.empty() || it->second.command == specs[i].command)) {
            out[i] = it;
            continue;
        }
        if (it != history.end() && changed != nullptr)
            changed->push_back(specs[i].label);
        if (!by_command) {
            by_command.emplace();
            for (auto r = history.begin(); r != history.end(); ++r)
                if (!r->second.command.empty())
                    if (const auto [at, fresh] = by_command->emplace(r->second.command, r); !fresh)
                        at->second = history.end();
        }
        if (const auto found = by_command->find(specs[i].command); found != by_command->end())
            out[i] = found->second;
    }
    return out;
}

std::vector<std::optional<double>> expected_durations(std::span<const cmdfile::JobSpec> specs, const History& history)
{
    std::vector<std::optional<double>> out(specs.size());
    const auto matched = match_history(specs, history);
    for (std::size_t i = 0; i < specs.size(); ++i)
        if (matched[i] != history.end())
            out[i] = matched[i]->second.duration_s;
    return out;
}

std::vector<std::size_t> shard_jobs(std::span<const cmdfile::JobSpec> specs, const History& history, Shard shard)
{
    std::vector<std::size_t> mine;
    const auto expected = expected_durations(specs, history);
    std::vector<double> known;
    for (const auto& e : expected)
        if (e)
            known.push_back(*e);
    if (known.empty()) {
        for (std::size_t i = shard.k - 1; i < specs.size(); i += shard.n)
            mine.push_back(i);
        return mine;
    }
    std::sort(known.begin(), known.end());
    const double median = known[known.size() / 2];
    std::vector<double> cost(specs.size());
    for (std::size_t i = 0; i < specs.size(); ++i)
        cost[i] = expected[i].value_or(median);
    std::vector<std::size_t> by_cost(specs.size());
    std::iota(by_cost.begin(), by_cost.end(), 0);
    std::stable_sort(by_cost.begin(), by_cost.end(), [&cost](std::size_t a, std::size_t b) { return cost[a] > cost[b]; });
    std::vector<double> load(shard.n, 0.0);
    for (std::size_t i : by_cost) {
        const auto least = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
        load[least] += cost[i];
        if (least == shard.k - 1)
            mine.push_back(i);
    }
    std::sort(mine.begin(), mine.end());
    return mine;
}

std::vector<std::size_t> failed_jobs(std::span<const cmdfile::JobSpec> specs, std::span<const std::size_t> chosen,
                                     const History& last_run)
{
    std::vector<std::size_t> out;
    const auto matched = match_history(specs, last_run);
    for (std::size_t i : chosen) {
        const auto it = matched[i];
        if (it == last_run.end() || (it->second.status != "passed" && it->second.status != "flaky"))
            out.push_back(i);
    }
    return out;
}

std::vector<std::size_t> order_jobs(std::span<const cmdfile::JobSpec> specs, std::vector<std::size_t> chosen,
                                    const History& history, Order order)
{
    if (order == Order::file)
        return chosen;
    const auto expected = expected_durations(specs, history);
    std::stable_sort(chosen.begin(), chosen.end(), [&expected](std::size_t a, std::size_t b) {
        if (!expected[a] || !expected[b])
            return !expected[a] && expected[b];
        return *expected[a] > *expected[b];
    });
    return chosen;
}

}  // namespace pto::plan
