// From the commands file and what earlier runs reported to the queue this run
// works through: history, order, shard, re-run of what failed. Pure
// functions of their inputs (the file readers aside), so that N CI machines
// given the same inputs make the same split.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <pto/error.hpp>

#include "cmdfile/commands_file.hpp"

namespace pto::plan {

struct Past {
    std::optional<double> duration_s;  // of its last run that ran at all
    std::string status;                // passed, failed, timeout, killed, cancelled, flaky
    std::string command;               // as its last record wrote it; empty if it did not
};

// Label -> its last report. Later lines win within a file, later files win
// across files.
using History = std::map<std::string, Past, std::less<>>;

struct ReportRead {
    // A last line without its newline that does not parse: what a run
    // killed while writing leaves.
    bool cut_off = false;
    // Records that say nothing usable (not JSON, no label or status, an
    // unknown status, a duration that is none), and where the first is
    // ("r.json:3: unknown status \"ok\"").
    std::size_t ignored = 0;
    std::string first_ignored;
    std::size_t used = 0;  // job records added
};

// Adds the --json report `text` (JSON Lines) to `history`, skipping what
// ReportRead counts; `name` is for ReportRead::first_ignored.
ReportRead add_report(History& history, std::string_view text, const std::string& name);

// Reads each FILE in turn; a FILE that does not exist is no error (the first
// run of a CI cache), one that cannot be read or holds no job's record is. A
// notice for each file whose last line was cut off or whose records were
// ignored goes to `notes`.
Expected<History> read_history(std::span<const std::string> files, std::vector<std::string>& notes);

// The report of the run --rerun-failed repeats: unlike a history file it
// must exist, since without it every job would run again unnoticed.
struct LastRun {
    History history;
    std::string text;  // as read, for last_records
};
Expected<LastRun> read_last_run(const std::string& file, std::vector<std::string>& notes);

// The last record of each job of the report `text` whose label is one of
// `labels`, each line with its newline, in the report's order: what a
// report that --rerun-failed rewrites in place keeps of the jobs it does
// not run again.
std::string last_records(std::string_view text, std::span<const std::string> labels);

enum class Order { file, longest };

struct Shard {
    std::size_t k = 1;  // 1-based
    std::size_t n = 1;
};

// "K/N" with 1 <= K <= N.
Expected<Shard> parse_shard(std::string_view text);

// Each job's record: its label's, when that record ran the same command (or
// names none), else (also for a label with no record) the one record that
// ran the job's command under another
// label (a default label that moved when a line was added above), else
// none (history.end()). `changed`: the labels whose record ran another
// command, for a notice.
std::vector<History::const_iterator> match_history(std::span<const cmdfile::JobSpec> specs, const History& history,
                                                   std::vector<std::string>* changed = nullptr);

// The expected duration of each job from history; nullopt when it has none.
std::vector<std::optional<double>> expected_durations(std::span<const cmdfile::JobSpec> specs,
                                                      const History& history);

// The positions (into specs) of the jobs in shard K of N. Without any history
// job i goes to shard (i mod N) + 1; with history, longest expected first
// into the least-loaded shard (ties by file order, then the lowest shard),
// jobs without history counted at the median of those with it.
std::vector<std::size_t> shard_jobs(std::span<const cmdfile::JobSpec> specs, const History& history, Shard shard);

// Of `chosen`, those whose last status in `last_run` was neither passed nor
// flaky, and those it does not know.
std::vector<std::size_t> failed_jobs(std::span<const cmdfile::JobSpec> specs, std::span<const std::size_t> chosen,
                                     const History& last_run);

// `chosen` in run order: as given for Order::file; for longest, the jobs
// without history first in file order, then longest expected first, ties
// in file order.
std::vector<std::size_t> order_jobs(std::span<const cmdfile::JobSpec> specs, std::vector<std::size_t> chosen,
                                    const History& history, Order order);

}  // namespace pto::plan
