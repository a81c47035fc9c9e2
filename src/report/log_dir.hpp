// --log-dir DIR: each finished job's whole output in DIR/<name>.log, the
// name made safe from its label. Jobs that never started get no file. A job
// that ran more than once (retries, a sick device) keeps every try there,
// each after a "[pto-par] try N of M: VERDICT ..." line; a job that ran once
// gets its bytes alone.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <pto/scheduler.hpp>

#include "common/unique_fd.hpp"

namespace pto::report {

class LogDir final : public RunObserver {
public:
    // A file name for each of `jobs`, made now from their labels.
    LogDir(std::string dir, std::span<const Job> jobs);

    // Creates DIR and its parents (like mkdir -p) and keeps it open, so that
    // every log lands in that directory even if its path changes meanwhile.
    // Call before the run: a DIR that cannot be made should stop pto-par
    // before any job starts.
    Expected<void> open();

    // Writes DIR/<name>.log, replacing any file of that name. A failure
    // (full disk, EFBIG past RLIMIT_FSIZE) is kept in error() and the run
    // goes on; later jobs still get their files.
    void on_finish(const Job&, const JobResult& r, const JobOutput& output) override;
    // The try that failed goes into the file now, under its header; the
    // file stays open for the next.
    void on_retry(const Job&, const JobResult& r, const JobOutput& output) override;

    // The first write failure, if any; later ones are likely the same cause.
    std::optional<Error> error() const { return error_; }

    // Where job `index` (its position among the jobs) is or would be logged.
    std::string path_for(std::size_t index) const;

private:
    // The job's file, made anew (see the .cpp); -1 after a failure, kept in error_.
    int create(std::size_t index);
    // Writes `output` to `fd`, each failure kept in error_; false after one.
    // `last`: the last byte written, or '\n' when none was.
    bool write_output(std::size_t index, int fd, const JobOutput& output, char& last);
    void failed(std::size_t index, const char* what, int err);

    std::string dir_;
    std::vector<std::string> names_;  // file name per job, ".log" included
    UniqueFd dir_fd_;
    struct Open {
        UniqueFd fd;
        char last = '\n';
    };
    std::map<std::size_t, Open> retried_;  // by index: the files of jobs between tries
    std::optional<Error> error_;
};

// The label as a file name part: only [A-Za-z0-9._+-] (others become '_'),
// no leading '.', never empty, at most max_log_name bytes.
inline constexpr std::size_t max_log_name = 100;
std::string safe_file_name(std::string_view label);

// One file name per job, "<safe label>.log", unique among them: a name that
// had to change and then meets another job's name gets "-<seq>" (so "a/b"
// and "a_b" become "a_b-1.log" and "a_b.log").
std::vector<std::string> log_file_names(std::span<const Job> jobs);

}  // namespace pto::report
