#include "report/status_lines.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <pto/devices.hpp>

#include "common/text.hpp"
#include "common/signal_names.hpp"

namespace pto::report {
namespace {

std::string devices_text(const std::vector<int>& ids)
{
    return ids.empty() ? std::string("none") : format_device_range(ids);
}

std::string fixed(double v, int digits)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

// The summary names at most this many jobs that did not pass.
constexpr std::size_t summary_list_most = 50;

const char* word_for(JobStatus s)
{
    switch (s) {
    case JobStatus::passed: return "PASS";
    case JobStatus::failed: return "FAIL";
    case JobStatus::timeout: return "TIMEOUT";
    case JobStatus::killed: return "KILLED";
    case JobStatus::cancelled: return "CANCEL";
    case JobStatus::flaky: return "FLAKY";
    }
    return "?";
}

const char* colour_of(JobStatus s)
{
    switch (s) {
    case JobStatus::passed: return "\x1b[32m";    // green
    case JobStatus::flaky: return "\x1b[33m";     // yellow
    case JobStatus::failed: return "\x1b[1;31m";  // bold red
    case JobStatus::timeout: return "\x1b[1;35m"; // bold magenta
    case JobStatus::killed: return "\x1b[1;33m";  // bold yellow
    case JobStatus::cancelled: return "\x1b[2m";  // dim
    }
    return "";
}

}  // namespace

std::size_t tries(const Job& job, const JobResult& r)
{
    const auto planned = job.retries + 1 +
                         static_cast<std::size_t>(std::count_if(r.attempts.begin(), r.attempts.end(),
                                                                [](const Attempt& a) { return !a.sick.empty(); }));
    // A try that neither a retry nor a sick device accounts for (a step
    // Slurm ran again) still counts: never "attempt 2 of 1".
    return std::max(planned, r.attempts.size() + 1);
}

// The verdict word (right after "[pto-par] ") in its colour.
std::string StatusLines::paint(std::string line, JobStatus status) const
{
    if (!colour_)
        return line;
    const std::size_t from = line.find("] ") + 2;
    const std::size_t to = line.find(' ', from);
    line.insert(to, "\x1b[0m");
    line.insert(from, colour_of(status));
    return line;
}

std::string time_limit_text(const JobResult& r)
{
    return (r.run_time_limit ? "the run's " : "its ") + fixed(r.time_limit_s, 1) + "s limit";
}

std::string format_finish_line(const JobResult& r)
{
    std::string line = "[pto-par] ";
    line += word_for(r.status);
    line += ' ';
    line += text::printable(r.label);
    if (r.status == JobStatus::cancelled)
        return line + (r.error.empty() ? "" : ": " + text::printable(r.error)) + "\n";
    if (r.signal != 0)
        line += " signal=" + signal_name(r.signal);
    else if (r.exit_code)
        line += " exit=" + std::to_string(*r.exit_code);
    // Appended piece by piece: GCC 12 at -O3 takes the temporaries of one
    // long sum for overlapping copies (-Wrestrict).
    line += ' ';
    line += fixed(r.duration_s, 2);
    line += "s devices=";
    line += devices_text(r.devices);
    if (!r.node.empty())
        line += " node=" + text::printable(r.node);
    if (r.status == JobStatus::timeout && r.time_limit_s > 0)
        line += " (past " + time_limit_text(r) + ")";
    if (r.stragglers > 0)
        line += " (stopped " + std::to_string(r.stragglers) + " leftover process" +
                (r.stragglers == 1 ? "" : "es") + ")";
    else if (r.stragglers < 0)
        line += " (stopped leftover processes)";
    if (!r.error.empty())
        line += ": " + text::printable(r.error);
    return line + "\n";
}

std::string format_summary_line(const Counts& c, double wall_s, int stopped_by_signal)
{
    std::string line = "[pto-par] " + std::to_string(c.passed) + " passed" +
                       (c.flaky > 0 ? " (" + std::to_string(c.flaky) + " flaky)" : std::string()) + ", " +
                       std::to_string(c.failed) +
                       " failed, " + std::to_string(c.timeout) + " timed out, " + std::to_string(c.killed) +
                       " killed, " + std::to_string(c.cancelled) + " cancelled in " + fixed(wall_s, 2) + "s";
    if (stopped_by_signal != 0)
        line += " (stopped by " + signal_name(stopped_by_signal) + ")";
    return line + "\n";
}

void StatusLines::on_start(const Job& job, const JobResult& r)
{
    if (verbosity_ < 0)
        return;
    std::string line = "[pto-par] START " + text::printable(r.label) + " pid=" + std::to_string(r.pid) +
                       " devices=" + devices_text(r.devices);
    if (!r.node.empty())
        line += " node=" + text::printable(r.node);
    if (verbosity_ > 0 && job.line != 0)
        line += " line=" + std::to_string(job.line) + ": " + text::printable(job.command);
    line += '\n';
    // Standard error going away must not stop the run: the sink counts what
    // it could not write, and never blocks.
    put(line);
}

void StatusLines::on_finish(const Job& job, const JobResult& r, const JobOutput&)
{
    switch (r.status) {
    case JobStatus::passed: ++counts_.passed; break;
    case JobStatus::flaky:
        ++counts_.passed;
        ++counts_.flaky;
        break;
    case JobStatus::failed: ++counts_.failed; break;
    case JobStatus::timeout: ++counts_.timeout; break;
    case JobStatus::killed: ++counts_.killed; break;
    case JobStatus::cancelled: ++counts_.cancelled; break;
    }
    if (r.status != JobStatus::passed)
        unpassed_.push_back({r.status, r.label, job.line});
    if (verbosity_ < 0 && r.status == JobStatus::passed)
        return;
    std::string line = format_finish_line(r);
    if (!r.attempts.empty()) {
        line.pop_back();
        line += " (" + std::string(r.status == JobStatus::flaky || r.status == JobStatus::passed ? "passed on" : "last of") + " attempt " +
                std::to_string(r.attempts.size() + 1) + " of " + std::to_string(tries(job, r)) + ")\n";
    }
    put_verdict(r.index, paint(std::move(line), r.status));  // see on_start
}

void StatusLines::on_retry(const Job& job, const JobResult& r, const JobOutput&)
{
    // The try as its own line, worded RETRY: a FAIL line here would read as
    // the job's verdict.
    std::string line = format_finish_line(r);
    const auto word = line.find(' ') + 1;
    line.replace(word, line.find(' ', word) - word, "RETRY");
    line.pop_back();
    const auto& sick = r.attempts.back().sick;
    const auto& node = r.attempts.back().node;
    if (!sick.empty())
        line += " (device" + std::string(sick.size() == 1 ? " " : "s ") +
                (node.empty() ? std::string() : text::printable(node) + ":") + devices_text(sick) +
                " failed the health check; running it again on other devices)\n";
    else
        line += " (attempt " + std::to_string(r.attempts.size()) + " of " + std::to_string(tries(job, r)) +
                "; running it again)\n";
    put_verdict(r.index, paint(std::move(line), JobStatus::flaky));  // see on_start
}

void StatusLines::on_cancel(const Job&, const JobResult& r)
{
    ++counts_.cancelled;
    put(paint(format_finish_line(r), r.status));  // see on_start
}

void StatusLines::on_stopping(const char* reason)
{
    put(std::string("[pto-par] stopping (") + reason + "): starting nothing more, stopping running jobs\n", true);
}

void StatusLines::on_device_sick(const std::string& node, int device, const std::string& why, const JobOutput& output)
{
    const std::string name =
        node.empty() ? std::to_string(device) : text::printable(node) + ":" + std::to_string(device);
    std::string text = "[pto-par] SICK device " + name + ": " + text::printable(why) +
                       "; withheld for the rest of the run";
    const auto shown = output.tail(timeout_dump_bytes);
    if (shown.empty()) {
        put(text + " (its check printed nothing)\n");  // see on_start
        return;
    }
    text += "; its check printed:\n";
    text.append(shown);
    if (shown.back() != '\n')
        text += '\n';
    text += "[pto-par] end of the check of device " + name + "\n";
    put(text);  // see on_start
}

void StatusLines::on_timeout(const Job&, const JobResult& r, const JobOutput& output, double elapsed_s)
{
    std::string text = "[pto-par] TIMEOUT " + text::printable(r.label) + " pid=" + std::to_string(r.pid) +
                       " devices=" + devices_text(r.devices) + " past " + time_limit_text(r) + ", ran " +
                       fixed(elapsed_s, 1) + "s; its output so far";
    const auto shown = output.tail(timeout_dump_bytes);
    if (output.size() > shown.size())
        text += " (last " + std::to_string(shown.size()) + " of " + std::to_string(output.size()) + " bytes)";
    text += ":\n";
    text.append(shown);
    if (!shown.empty() && shown.back() != '\n')
        text += '\n';
    text += "[pto-par] end of output of " + text::printable(r.label) + "\n";
    put(text, true);  // see on_start; a hung job may never end its line
}

void StatusLines::on_status(const StatusReport& report)
{
    std::string text = "[pto-par] status of pid " + std::to_string(getpid()) + " after " + fixed(report.elapsed_s, 1) +
                       "s: " +
                       std::to_string(report.running.size()) + " running, " + std::to_string(report.queued) +
                       " queued, " + std::to_string(report.finished) + " finished";
    if (!report.checks.empty())
        text += ", " + std::to_string(report.checks.size()) +
                (report.checks.size() == 1 ? " device check" : " device checks");
    text += '\n';
    for (const auto& c : report.checks)
        text += "[pto-par]   check of device " + std::to_string(c.device) + " pid=" + std::to_string(c.pid) +
                " running " + fixed(c.elapsed_s, 1) + "s" +
                (c.shell_ended ? ", its shell exited; stopping what it left" : "") + "\n";
    for (const auto& j : report.running) {
        text += "[pto-par]   " + text::printable(j.result->label) + " pid=" + std::to_string(j.result->pid) +
                " devices=" + devices_text(j.result->devices) + " running " + fixed(j.elapsed_s, 1) + "s, " +
                std::to_string(j.output->size() + j.output->dropped()) + " bytes of output";
        const auto last = j.output->last_line();
        if (!last.empty())
            text += ", last: " + text::printable(last.substr(0, 200));
        text += '\n';
    }
    if (!report.waiting.empty())
        text += "[pto-par]   " + text::printable(report.waiting) + "\n";
    put(text, true);  // see on_start; asked for now
}

// With -v: which run (pid) holds what the next job waits for.
void StatusLines::on_waiting(const Job& job, const std::string& what)
{
    // A run that waits for another says why once per job, or it looks hung;
    // -v says each change of what it waits for.
    const bool first = waited_.insert(job.seq).second;
    if (verbosity_ > 0 || (verbosity_ == 0 && first))
        note("WAIT " + text::printable(job.label) + " for " + text::printable(what));
}

void StatusLines::put(std::string_view text, bool now) const
{
    if (route_)
        route_(text, now);
    else
        err_.write(text);
}

void StatusLines::put_verdict(std::size_t index, std::string_view text) const
{
    if (verdict_route_)
        verdict_route_(index, text);
    else
        put(text);
}

void StatusLines::on_notice(const std::string& text)
{
    // Notices carry text from outside (srun's lines, file names): escaped
    // line by line, so that no control byte reaches the terminal raw.
    std::string escaped;
    std::size_t from = 0;
    for (;;) {
        const auto nl = text.find('\n', from);
        escaped += text::printable(std::string_view(text).substr(from, nl - from));
        if (nl == std::string::npos)
            break;
        escaped += '\n';
        from = nl + 1;
    }
    note(escaped);
}

void StatusLines::note(const std::string& text) const
{
    put("[pto-par] " + text + "\n");  // see on_start
}

void StatusLines::devices(const std::vector<DeviceStats>& all) const
{
    // Whatever -q says: these are about failures.
    if (auto lines = device_lines(all); !lines.empty())
        put(lines);  // see on_start
}

void StatusLines::summary(double wall_s, int stopped_by_signal, const std::string& what,
                          const std::string& again) const
{
    std::string line = format_summary_line(counts_, wall_s, stopped_by_signal);
    if (!what.empty())
        line.insert(line.size() - 1, " [" + what + "]");
    if (colour_) {
        // Green when all passed, else red: the one line read after a run.
        const bool clean = counts_.failed == 0 && counts_.timeout == 0 && counts_.killed == 0 &&
                           counts_.cancelled == 0 && stopped_by_signal == 0;
        line = "[pto-par] " + std::string(clean ? "\x1b[1;32m" : "\x1b[1;31m") + line.substr(10, line.size() - 11) +
               "\x1b[0m\n";
    }
    std::size_t listed = 0;
    for (const auto& u : unpassed_) {
        if (++listed > summary_list_most) {
            line += "[pto-par]   and " + std::to_string(unpassed_.size() - summary_list_most) +
                    " more (--json lists every job)\n";
            break;
        }
        const std::string word = word_for(u.status);
        line += "[pto-par]   " + (colour_ ? colour_of(u.status) + word + "\x1b[0m" : word) + " " +
                text::printable(u.label) +
                (u.line != 0 ? " (line " + std::to_string(u.line) + ")" : std::string()) + "\n";
    }
    const bool rerun = counts_.failed + counts_.timeout + counts_.killed + counts_.cancelled > 0;
    if (rerun && !again.empty())
        line += "[pto-par] to run what did not pass again: " + text::printable(again) + "\n";
    put(line);  // see on_start
}

}  // namespace pto::report
