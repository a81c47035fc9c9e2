// --junit FILE: one <testsuite>, a <testcase> per job in the file's order,
// well-formed XML 1.0 whatever bytes the jobs printed.
//
// Memory stays bounded whatever the jobs print: as each job ends its
// escaped output goes to an unlinked temporary file in $TMPDIR, and close()
// copies it into the report. The report appears atomically (written beside
// FILE, then renamed over it), so a reader never sees half of one.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <pto/scheduler.hpp>

#include "common/replaced_file.hpp"
#include "common/unique_fd.hpp"
#include "report/xml_escape.hpp"

namespace pto::report {

class JunitReport final : public RunObserver {
public:
    // --junit-output-limit's default: what CI servers read without choking.
    static constexpr std::uint64_t default_output_limit = 4u << 20;

    // One testcase per job of `jobs`, in their order; `suite_name` names the testsuite and
    // is every testcase's classname. A job's <system-out> holds at most
    // `output_limit` bytes of its output (give or take a character's bytes):
    // past it, the first and last halves, cut at character boundaries, with
    // the count of bytes left out between them.
    JunitReport(std::string path, std::span<const Job> jobs, std::string suite_name,
                std::uint64_t output_limit = default_output_limit);
    JunitReport(const JunitReport&) = delete;
    JunitReport& operator=(const JunitReport&) = delete;

    // Before the run: creates the file the report will be renamed from, in
    // FILE's directory, and the temporary file in $TMPDIR, so that a missing
    // directory or a read-only disk stops pto-par before any job starts.
    Expected<void> open();

    void on_finish(const Job&, const JobResult& r, const JobOutput& output) override;
    void on_cancel(const Job&, const JobResult& r) override;
    void on_retry(const Job&, const JobResult& r, const JobOutput& output) override;

    // Name/value pairs for the testsuite's <properties>, such as the
    // per-device counts; before close().
    void set_suite_properties(std::vector<std::pair<std::string, std::string>> properties)
    {
        suite_properties_ = std::move(properties);
    }

    // Writes FILE. Jobs never reported to this observer count as skipped, so
    // every job of the file is in the report. Call once, on every exit path.
    Expected<void> close(double wall_s);

    // The first time a job's output could not be kept for the report (a full
    // $TMPDIR); that testcase says so in its <system-err>, the rest are whole.
    std::optional<Error> error() const { return error_; }

private:
    struct Case {
        bool reported = false;
        JobStatus status = JobStatus::cancelled;
        std::string head;       // <testcase ...> up to the output; a skipped one until reported
        std::string note;       // for <system-err>, empty if none
        std::uint64_t offset = 0;  // its escaped output in the spool
        std::uint64_t length = 0;
        // Tries before the last, as Maven Surefire writes them: <flakyFailure>
        // (or <flakyError> for a timeout) when a later try passed, else
        // <rerunFailure>/<rerunError>. The element's name is settled at the end.
        struct Rerun {
            bool error = false;    // timed out rather than failed
            std::string message;   // attribute, escaped
            std::string body;      // <system-out> with the try's last output, escaped
        };
        std::vector<Rerun> reruns;
    };

    void record(const Job& job, const JobResult& r, const JobOutput* output);
    std::string testcase_head(const Job& job, const JobResult& r) const;

    std::string path_;
    std::string suite_;
    std::uint64_t output_limit_;
    std::vector<Case> cases_;
    std::vector<std::pair<std::string, std::string>> suite_properties_;
    UniqueFd spool_;
    std::uint64_t spool_size_ = 0;
    ReplacedFile out_;
    std::string timestamp_;
    std::string hostname_;
    bool opened_ = false;
    std::optional<Error> error_;
};

}  // namespace pto::report
