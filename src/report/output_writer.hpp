// Job output on standard output, in one of the --output modes. Standard
// output carries job bytes only (plus the [label] prefixes of stream mode).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <pto/scheduler.hpp>

#include "output/sink.hpp"
#include "report/ci_markers.hpp"

namespace pto::report {

enum class OutputMode { group, stream, failed, none };

// Stream mode splits a line longer than this into lines of this size.
inline constexpr std::size_t stream_line_limit = 64 * 1024;

class OutputWriter final : public RunObserver {
public:
    // `out` must outlive this object. With `ci`, each job's block is a
    // collapsible section of the CI log, and a job that did not pass is
    // annotated (stream mode: annotations only, since lines interleave).
    // `token` is the run's random_token() for the CI markers. With `tag`
    // (group and failed), each line of a block is prefixed "[label] " as in
    // stream mode.
    OutputWriter(output::Sink& out, OutputMode mode, CiKind ci = CiKind::none, std::string token = {},
                 bool tag = false)
        : out_(out), mode_(mode), ci_(ci), token_(std::move(token)), tag_(tag) {}

    // Group and failed write a job's every byte at its end; stream has
    // written them as they came, and none never does (RunOptions::whole_output).
    bool needs_whole_output() const { return mode_ == OutputMode::group || mode_ == OutputMode::failed; }

    void on_output(const Job&, const JobResult&, std::string_view bytes) override;
    void on_finish(const Job&, const JobResult&, const JobOutput& output) override;

private:
    struct Stream {
        std::string prefix;   // "[label] ", made once per job, padded to whole blocks (see the .cpp)
        std::size_t prefix_size = 0;  // without the padding
        std::string partial;  // the line not finished yet
    };
    static Stream tagged(const Job& job);
    // Writes the complete lines of `bytes`, each prefixed; keeps the rest.
    void put_lines(Stream& st, std::string_view bytes);
    // Writes the line left without its newline, ended.
    void end_lines(Stream& st);

    output::Sink& out_;
    OutputMode mode_;
    CiKind ci_;
    std::string token_;
    bool tag_;
    std::map<std::size_t, Stream> streams_;  // stream mode: per running job
    std::vector<char> lines_;                // stream mode: reused, so no allocation per chunk
};

}  // namespace pto::report
