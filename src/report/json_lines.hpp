// --json: one object per job, JSON Lines, written as each job ends; the
// never-started follow as "cancelled", so every job of the file is there.
#pragma once

#include <string>

#include <pto/scheduler.hpp>

namespace pto::report {

class JsonLines final : public RunObserver {
public:
    explicit JsonLines(int fd) : fd_(fd) {}

    void on_finish(const Job& job, const JobResult& r, const JobOutput&) override { write(job, r); }
    void on_cancel(const Job& job, const JobResult& r) override { write(job, r); }

    // False once a write failed (errno says why); later lines are dropped.
    bool ok() const { return ok_; }

private:
    void write(const Job& job, const JobResult& r);

    int fd_;
    bool ok_ = true;
};

// One job as a JSON object, without the newline.
std::string job_json(const Job& job, const JobResult& r);

// A JSON string literal for arbitrary bytes: each byte that is not UTF-8
// becomes \udcXX (a lone surrogate, as Python's surrogateescape), so the line
// is always JSON and plan::parse_json gives the very bytes back.
std::string json_string(std::string_view bytes);

}  // namespace pto::report
