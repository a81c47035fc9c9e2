// Job output on standard output, in one of the --output modes. Standard
// output carries job bytes only (plus the [label] prefixes of stream mode).
#pragma once

#include <map>
#include <string>

#include <pto/scheduler.hpp>

#include "output/sink.hpp"

namespace pto::report {

enum class OutputMode { group, stream, failed, none };

// Stream mode splits a line longer than this into lines of this size.
inline constexpr std::size_t stream_line_limit = 64 * 1024;

class OutputWriter final : public RunObserver {
public:
    // `out` must outlive this object.
    OutputWriter(output::Sink& out, OutputMode mode) : out_(out), mode_(mode) {}

    void on_output(const Job&, const JobResult&, std::string_view bytes) override;
    void on_finish(const Job&, const JobResult&, const JobOutput& output) override;

private:
    output::Sink& out_;
    OutputMode mode_;
    std::map<std::size_t, std::string> partial_;  // stream mode: unfinished line per job
    std::string lines_;                           // stream mode: reused, so no allocation per chunk
};

}  // namespace pto::report
