// --json: one object per job, JSON Lines, written as each job ends; the
// never-started follow as "cancelled", so every job of the file is there;
// then one per device.
#pragma once

#include <string>
#include <vector>

#include <pto/scheduler.hpp>

#include "report/device_stats.hpp"

namespace pto::report {

class JsonLines final : public RunObserver {
public:
    // with_node: every record has "node" (under --launcher slurm).
    JsonLines(int fd, bool with_node) : fd_(fd), with_node_(with_node) {}

    void on_finish(const Job& job, const JobResult& r, const JobOutput&) override { write(job, r); }
    void on_cancel(const Job& job, const JobResult& r) override { write(job, r); }

    // Records kept from an earlier report (JSON Lines, each with its
    // newline), before any job of this run ends.
    void write_kept(std::string_view lines);

    // After the last job: a record per device ("record":"device"), which
    // job-only readers tell apart from a job's by that key.
    void write_devices(const std::vector<DeviceStats>& devices);

    // False once a write failed (errno says why); later lines are dropped.
    bool ok() const { return ok_; }

private:
    void write(const Job& job, const JobResult& r);

    int fd_;
    bool with_node_;
    bool ok_ = true;
};

// One job as a JSON object, without the newline.
std::string job_json(const Job& job, const JobResult& r, bool with_node);

// A JSON string literal for arbitrary bytes: each byte that is not UTF-8
// becomes \udcXX (a lone surrogate, as Python's surrogateescape), so the line
// is always JSON and plan::parse_json gives the very bytes back.
std::string json_string(std::string_view bytes);

}  // namespace pto::report
