// Job output on standard output, in one of the --output modes. Standard
// output carries job bytes only (plus the [label] prefixes of stream mode).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
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
    // `token` is the run's random_token(), for the CI markers of a block when
    // a token of its own cannot be drawn. With `tag`
    // (group and failed), each line of a block is prefixed "[label] " as in
    // stream mode.
    OutputWriter(output::Sink& out, OutputMode mode, CiKind ci = CiKind::none, std::string token = {},
                 bool tag = false)
        : out_(out), mode_(mode), ci_(ci), token_(std::move(token)), tag_(tag) {}

    // Group and failed write a job's every byte at its end (or, for group's
    // live block, as it comes and what was kept before); stream has written
    // them as they came, and none never does (RunOptions::whole_output).
    bool needs_whole_output() const { return mode_ == OutputMode::group || mode_ == OutputMode::failed; }

    // Group mode's live block (SPEC section 5): whether the job at `index`
    // is the live one, whose bytes go out as they come
    // (RunOptions::output_live_for).
    bool live_for(std::size_t index) const { return live_ && live_->index == index; }
    // Where the live job's bytes may go as they are (RunOptions::
    // output_passage): standard output, once what it kept before is written
    // and while nothing waits there; never tagged.
    JobOutput::Passage passage_for(std::size_t index);
    // Where a block that must wait for the live one is kept meanwhile;
    // without it, in memory.
    void set_hold_place(SpillPlace place) { hold_place_ = std::move(place); }

    // One log: standard error is standard output (2>&1, one terminal), and
    // the status lines come through here (status), so that each starts a
    // line. After a block that ended in mid-line it starts a new one. None
    // goes inside the live block (nor its CI group): the block is closed
    // first, at the end of the line in the making, or at once with a
    // newline when `now` (a status report asked for, a time limit, a stop:
    // a hung job may never end its line). The job's later bytes are kept,
    // and written as a block of its own when it ends ("label (continued)").
    // The live block's bytes then pass through here, never in the kernel.
    void set_one_log() { one_log_ = true; }
    void status(std::string_view text, bool now);
    // One log: the job's verdict line (StatusLines' on_finish and on_retry,
    // which come just before this writer's), written right after its block
    // wherever that goes.
    void verdict(std::size_t index, std::string_view text);
    // Whether the log is at the start of a line (a progress line may be drawn).
    bool at_line_start() const { return at_line_start_; }

    void on_start(const Job&, const JobResult&) override;
    void on_output(const Job&, const JobResult&, std::string_view bytes) override;
    void on_output_live(const Job&, const JobResult&, std::string_view bytes, const JobOutput& kept) override;
    void on_finish(const Job&, const JobResult&, const JobOutput& output) override;
    void on_retry(const Job&, const JobResult&, const JobOutput& output) override;

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

    // A whole block: its markers with the verdict, every byte, the annotation.
    // `continued`: the rest of a block whose live part was closed (close_live).
    void write_block(const Job& job, const JobResult& r, const JobOutput& output, bool continued = false);
    // Everything the live job kept so far, written: from now on only new bytes.
    void show_kept(const Job& job, const JobOutput& kept);
    // Bytes of the live block, tagged if asked; how many of them went out
    // (a block closed at a line's end keeps the rest for its continuation).
    std::size_t write_live(const Job& job, std::string_view bytes);
    // The live block ends: what was not shown yet, the closing marker, and
    // (unless the job runs again) the annotation.
    void end_live(const Job& job, const JobResult& r, const JobOutput& output, bool annotate);
    // After a block ends: the blocks that waited, then a job left running
    // alone becomes live.
    void after_block();
    // Writes the status lines that waited, on a line of their own.
    void flush_status();
    // One log, a status line to write: the live block ends here (see
    // set_one_log), or stops being live if nothing of it is out yet.
    void close_live();
    // The verdict line of job `index` that came before its block, if any.
    std::string take_verdict(std::size_t index);
    // A token for one block's markers, so that a job that reads the log
    // learns none that another block uses.
    std::string block_token() const;
    // Every write but a whole JobOutput's, so that the line's state is known.
    void emit(std::string_view bytes);

    output::Sink& out_;
    OutputMode mode_;
    CiKind ci_;
    std::string token_;
    bool tag_;
    std::optional<SpillPlace> hold_place_;
    bool one_log_ = false;
    bool at_line_start_ = true;  // of what went to out_
    std::string held_status_;    // one log: status lines waiting for the live block's line to end
    std::map<std::size_t, const Job*> running_;  // group mode: by index; the run keeps the Jobs
    struct Live {
        std::size_t index;
        std::string token;   // of its markers
        bool shown = false;  // what the job kept before it became live is written, after its group's start
        std::uint64_t written = 0;  // of the job's bytes, as they were handed to write_live
        char last = '\n';    // the last byte written, for the closing marker
        bool passed = false; // bytes went past this writer: the job's output has the last one
    };
    std::optional<Live> live_;
    struct Held {
        Job job;
        JobResult result;
        JobOutput output;
        std::string verdict;
        bool continued;
    };
    // Jobs whose live block was closed before they ended: how many of their
    // bytes it showed.
    std::map<std::size_t, std::uint64_t> continued_;
    std::optional<std::pair<std::size_t, std::string>> verdict_;  // see verdict()
    std::deque<Held> held_;  // blocks of jobs that ended beside the live one, in order
    std::map<std::size_t, Stream> streams_;  // stream mode: per running job
    std::vector<char> lines_;                // stream mode: reused, so no allocation per chunk
};

}  // namespace pto::report
