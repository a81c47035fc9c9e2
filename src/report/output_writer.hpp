// Job output on standard output, in one of the --output modes. Standard
// output carries job bytes only (plus the [label] prefixes of stream mode).
#pragma once

#include <map>
#include <string>

#include <pto/scheduler.hpp>

namespace pto::report {

enum class OutputMode { group, stream, failed, none };

// Stream mode splits a line longer than this into lines of this size.
inline constexpr std::size_t stream_line_limit = 64 * 1024;

class OutputWriter final : public RunObserver {
public:
    OutputWriter(int fd, OutputMode mode) : fd_(fd), mode_(mode) {}

    void on_output(const Job&, const JobResult&, std::string_view bytes) override;
    void on_finish(const Job&, const JobResult&, const JobOutput& output) override;

    // The reader of standard output went away (EPIPE): the run goes on, its
    // output is dropped, and the caller may say so.
    bool reader_gone() const { return reader_gone_; }

private:
    void emit(std::string_view bytes);

    int fd_;
    OutputMode mode_;
    bool reader_gone_ = false;
    std::map<std::size_t, std::string> partial_;  // stream mode: unfinished line per job
};

}  // namespace pto::report
