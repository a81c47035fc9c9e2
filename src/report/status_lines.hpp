// The "[pto-par] ..." lines on standard error: one per event, so that a hung
// job is the START line without an end, and a summary at the end.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <pto/scheduler.hpp>

#include "output/sink.hpp"
#include "report/device_stats.hpp"

namespace pto::report {

struct Counts {
    int passed = 0, failed = 0, timeout = 0, killed = 0, cancelled = 0;
    int flaky = 0;  // also counted in passed
};

class StatusLines final : public RunObserver {
public:
    // verbosity: -1 only jobs that did not pass, 0 normal, 1 with commands.
    // `err` must outlive this object.
    // `colour`: the verdict words and the summary in ANSI colours.
    StatusLines(output::Sink& err, int verbosity, bool colour = false)
        : err_(err), verbosity_(verbosity), colour_(colour)
    {
    }

    // Where the lines go instead of `err` (one log: OutputWriter::status);
    // `now` for those that cannot wait for a job's line to end.
    void set_route(std::function<void(std::string_view, bool now)> route) { route_ = std::move(route); }
    // Where a job's verdict line (FAIL ..., RETRY ...) goes instead, with
    // the job's index: one log writes it right after the job's block
    // (OutputWriter::verdict).
    void set_verdict_route(std::function<void(std::size_t index, std::string_view)> route)
    {
        verdict_route_ = std::move(route);
    }

    void on_start(const Job&, const JobResult&) override;
    void on_finish(const Job&, const JobResult&, const JobOutput&) override;
    void on_cancel(const Job&, const JobResult&) override;
    void on_retry(const Job&, const JobResult&, const JobOutput&) override;
    void on_stopping(const char* reason) override;
    void on_timeout(const Job&, const JobResult&, const JobOutput& output, double elapsed_s) override;
    void on_status(const StatusReport& report) override;
    void on_waiting(const Job& job, const std::string& what) override;
    void on_notice(const std::string& text) override;
    void on_device_sick(const std::string& node, int device, const std::string& why, const JobOutput& output) override;

    // Any line of ours, e.g. where the pool came from.
    void note(const std::string& text) const;
    // At the end, before summary(): a line per device that saw a failure.
    void devices(const std::vector<DeviceStats>& all) const;
    // `what`: which part of the file this run was, e.g. "shard 2/4"; empty for all of it.
    // After it, as pytest's short summary: each job that did not pass, or
    // was flaky, by label and line, and `again`, the command that runs what
    // did not pass once more (empty: none can be given).
    void summary(double wall_s, int stopped_by_signal, const std::string& what = {},
                 const std::string& again = {}) const;

    const Counts& counts() const { return counts_; }

private:
    void put(std::string_view text, bool now = false) const;
    void put_verdict(std::size_t index, std::string_view text) const;

    output::Sink& err_;
    std::function<void(std::string_view, bool)> route_;
    std::function<void(std::size_t, std::string_view)> verdict_route_;
    int verbosity_;
    bool colour_;
    std::string paint(std::string line, JobStatus status) const;
    Counts counts_;
    std::set<std::size_t> waited_;  // the jobs (seq) said to wait
    // The jobs the summary names, as they ended.
    struct Unpassed {
        JobStatus status;
        std::string label;
        std::size_t line;
    };
    std::vector<Unpassed> unpassed_;
};

// "its 3.0s limit", "the run's 60.0s limit": what a timed-out job ran past.
std::string time_limit_text(const JobResult& r);

// How much of a timed-out job's output the TIMEOUT report shows on standard
// error; all of it still goes where --output sends it.
inline constexpr std::size_t timeout_dump_bytes = 64 * 1024;

// How many tries the job may have: its retries, and one more for each try
// that a sick device failed.
std::size_t tries(const Job& job, const JobResult& r);

// Pure formatting, for the observer above and its tests.
std::string format_finish_line(const JobResult& r);
std::string format_summary_line(const Counts& c, double wall_s, int stopped_by_signal);


}  // namespace pto::report
