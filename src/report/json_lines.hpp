// --json: one object per job, JSON Lines, written as each job ends; the
// never-started follow as "cancelled", so every job of the file is there.
#pragma once

#include <span>
#include <string>

#include <pto/scheduler.hpp>

#include "cmdfile/commands_file.hpp"

namespace pto::report {

class JsonLines final : public RunObserver {
public:
    JsonLines(int fd, std::span<const cmdfile::JobSpec> specs) : fd_(fd), specs_(specs) {}

    void on_finish(const Job&, const JobResult& r, const JobOutput&) override { write(r); }
    void on_cancel(const Job&, const JobResult& r) override { write(r); }

    // False once a write failed (errno says why); later lines are dropped.
    bool ok() const { return ok_; }

private:
    void write(const JobResult& r);

    int fd_;
    std::span<const cmdfile::JobSpec> specs_;
    bool ok_ = true;
};

// One job as a JSON object, without the newline.
std::string job_json(const JobResult& r, const cmdfile::JobSpec& spec);

// A JSON string literal for arbitrary bytes: invalid UTF-8 bytes become
// \u00XX (read as Latin-1), so the line is always valid JSON.
std::string json_string(std::string_view bytes);

}  // namespace pto::report
