#include "report/output_writer.hpp"

#include <algorithm>
#include <cstring>
#include <ctime>

namespace pto::report {

namespace {

// Past this, the prefixed lines built so far are handed to the sink before
// more are added: a chunk of empty lines under a long label would otherwise
// grow the buffer to the chunk's size times the prefix's.
constexpr std::size_t lines_flush_at = 4 << 20;

// A prefix is copied in blocks of this size, from a copy padded to whole
// blocks: fixed-size copies the compiler makes plain moves of, where a
// memcpy of a size it cannot know is a call. The padding lands past the
// prefix, where the line's bytes then go.
constexpr std::size_t prefix_block = 16;

char* put_prefix(char* at, const std::string& padded, std::size_t size)
{
    for (std::size_t i = 0; i < size; i += prefix_block)
        std::memcpy(at + i, padded.data() + i, prefix_block);
    return at + size;
}

char* put(char* at, const char* bytes, std::size_t size)
{
    std::memcpy(at, bytes, size);
    return at + size;
}

}  // namespace

// A chunk of a megabyte holds thousands of lines, each copied with its
// prefix into one buffer that is written once: per line, one memchr, one
// memcpy and a few moves for the prefix. Appending to a std::string piece
// by piece, five pieces a line each with its size check, cost much more:
// under callgrind, 100 MB of 128-byte lines took the runner 161 M
// instructions that way, 95 M this way (--output none: 12 M). What is left
// is the copy itself: on W3 the runner's CPU time is then 0.30 s against
// 0.25 s for --output none and 0.24 s for cat.
void OutputWriter::on_output(const Job& job, const JobResult& r, std::string_view bytes)
{
    if (mode_ != OutputMode::stream || bytes.empty())
        return;
    Stream& st = streams_[r.index];
    if (st.prefix.empty())
        st = tagged(job);
    put_lines(st, bytes);
}

OutputWriter::Stream OutputWriter::tagged(const Job& job)
{
    Stream st;
    st.prefix = "[" + job.label + "] ";
    st.prefix_size = st.prefix.size();
    st.prefix.resize((st.prefix_size + prefix_block - 1) / prefix_block * prefix_block, ' ');
    return st;
}

void OutputWriter::end_lines(Stream& st)
{
    if (!st.partial.empty())
        emit(st.prefix.substr(0, st.prefix_size) + st.partial + "\n");
    st.partial.clear();
}

void OutputWriter::put_lines(Stream& st, std::string_view bytes)
{
    const std::string& prefix = st.prefix;
    const std::size_t prefix_size = st.prefix_size;
    std::string& pending = st.partial;

    // [lines_.data(), at) is built; the buffer only grows, and what lies
    // past `at` is not kept.
    char* at = lines_.data();
    char* stop = at + lines_.size();
    const auto make_room = [this, &at, &stop](std::size_t n) {
        if (static_cast<std::size_t>(stop - at) >= n)
            return;
        auto used = static_cast<std::size_t>(at - lines_.data());
        if (used > 0 && used + n > lines_flush_at) {
            emit(std::string_view(lines_.data(), used));
            used = 0;
        }
        if (lines_.size() < used + n)
            lines_.resize(std::max(used + n, 2 * lines_.size()));
        at = lines_.data() + used;
        stop = lines_.data() + lines_.size();
    };
    const char* from = bytes.data();
    const char* const end = from + bytes.size();
    const auto next_newline = [&from, end] {
        return static_cast<const char*>(std::memchr(from, '\n', static_cast<std::size_t>(end - from)));
    };
    if (!pending.empty()) {
        if (const char* nl = next_newline()) {
            // The line an earlier chunk began ends here.
            const auto size = static_cast<std::size_t>(nl + 1 - from);
            make_room(prefix.size() + pending.size() + size);
            at = put(put(put_prefix(at, prefix, prefix_size), pending.data(), pending.size()), from, size);
            from += size;
            pending.clear();
        }
    }
    while (const char* nl = next_newline()) {
        const auto size = static_cast<std::size_t>(nl + 1 - from);
        make_room(prefix.size() + size);
        at = put(put_prefix(at, prefix, prefix_size), from, size);
        from += size;
    }
    pending.append(from, end);
    // A line without end must not grow without bound: past the limit it is
    // shown in pieces, each a line of its own.
    std::size_t cut = 0;
    for (; pending.size() - cut >= stream_line_limit; cut += stream_line_limit) {
        make_room(prefix.size() + stream_line_limit + 1);
        at = put(put_prefix(at, prefix, prefix_size), pending.data() + cut, stream_line_limit);
        *at++ = '\n';
    }
    pending.erase(0, cut);
    if (at != lines_.data())
        emit(std::string_view(lines_.data(), static_cast<std::size_t>(at - lines_.data())));
}

void OutputWriter::on_start(const Job& job, const JobResult& r)
{
    if (mode_ != OutputMode::group)
        return;
    running_[r.index] = &job;
    after_block();
}

void OutputWriter::on_output_live(const Job& job, const JobResult& r, std::string_view bytes, const JobOutput& kept)
{
    if (mode_ == OutputMode::stream) {
        on_output(job, r, bytes);
        kept.mark_shown(bytes.size(), bytes.size());
        return;
    }
    if (!live_for(r.index))
        return;
    if (live_->shown) {
        kept.mark_shown(bytes.size(), write_live(job, bytes));
        return;
    }
    // Live from now on: what it printed before first (`kept` holds `bytes`).
    show_kept(job, kept);
}

void OutputWriter::show_kept(const Job& job, const JobOutput& kept)
{
    live_->shown = true;
    emit(live_group_begin(ci_, job, static_cast<std::int64_t>(std::time(nullptr)), live_->token));
    // A status line that waited for a line's end closes the block on the way.
    const std::size_t index = live_->index;
    const auto walked = kept.for_each_chunk([this, &job, index](std::string_view chunk) {
        write_live(job, chunk);
        return live_for(index);
    });
    if (!walked && live_for(index))
        write_live(job, "[pto-par: " + walked.error().message + "]\n");
}

JobOutput::Passage OutputWriter::passage_for(std::size_t index)
{
    if (tag_ || !live_for(index) || !live_->shown)
        return {};
    // In one log the bytes go through here, where their line ends are seen.
    if (one_log_) {
        JobOutput::Passage p;
        p.shown = true;
        return p;
    }
    auto p = out_.passage();
    if (p.fd >= 0)
        live_->passed = true;
    p.shown = true;
    return p;
}

std::size_t OutputWriter::write_live(const Job& job, std::string_view bytes)
{
    if (bytes.empty())
        return 0;
    live_->last = bytes.back();
    if (!tag_) {
        // Status lines that wait for this line's end go right after it, and
        // the block ends there: the rest of these bytes are kept, for the
        // block's continuation.
        if (const auto nl = bytes.find('\n'); !held_status_.empty() && nl != std::string_view::npos) {
            emit(bytes.substr(0, nl + 1));
            live_->written += nl + 1;
            close_live();
            return nl + 1;
        }
        emit(bytes);
        live_->written += bytes.size();
        return bytes.size();
    }
    live_->written += bytes.size();
    Stream& st = streams_[live_->index];
    if (st.prefix.empty())
        st = tagged(job);
    put_lines(st, bytes);
    return bytes.size();
}

void OutputWriter::end_live(const Job& job, const JobResult& r, const JobOutput& output, bool annotate)
{
    if (!live_->shown)
        show_kept(job, output);
    // Bytes that went by in the kernel were never seen here: the end the
    // job's output kept says how the block ends.
    const bool line_ended = live_->passed ? output.size() == 0 || output.tail(1) == "\n" : live_->last == '\n';
    if (const auto it = streams_.find(r.index); it != streams_.end()) {
        end_lines(it->second);
        streams_.erase(it);
    } else if (ci_ != CiKind::none && !line_ended) {
        emit("\n");
    }
    const auto now = static_cast<std::int64_t>(std::time(nullptr));
    emit(group_end(ci_, job, now, live_->token));
    if (annotate)
        emit(annotation(ci_, r));
    live_.reset();
    flush_status();
}

void OutputWriter::status(std::string_view text, bool now)
{
    held_status_.append(text);
    if (!live_)
        flush_status();
    else if (now || !live_->shown || at_line_start_)
        close_live();
}

void OutputWriter::close_live()
{
    const std::size_t index = live_->index;
    if (live_->shown) {
        std::uint64_t shown = live_->written;
        if (const auto it = streams_.find(index); it != streams_.end()) {
            // Tagged: the line in the making is not out yet; it opens the rest.
            shown -= it->second.partial.size();
            streams_.erase(it);
        } else if (!at_line_start_) {
            emit("\n");
        }
        emit(group_end(ci_, *running_.at(index), static_cast<std::int64_t>(std::time(nullptr)), live_->token));
        continued_[index] = shown;
    }
    live_.reset();
    flush_status();
    after_block();
}

void OutputWriter::verdict(std::size_t index, std::string_view text)
{
    verdict_.emplace(index, std::string(text));
}

std::string OutputWriter::take_verdict(std::size_t index)
{
    if (!verdict_ || verdict_->first != index)
        return {};
    std::string text = std::move(verdict_->second);
    verdict_.reset();
    return text;
}

std::string OutputWriter::block_token() const
{
    if (ci_ == CiKind::none)
        return {};
    auto token = random_token();
    // Without one the run's will do: no job has seen it unless it read the log.
    return token ? *token : token_;
}

void OutputWriter::flush_status()
{
    if (held_status_.empty())
        return;
    // After a block that ended in mid-line, or breaking the live one's line
    // when a status line cannot wait for its end.
    if (!at_line_start_)
        emit("\n");
    emit(held_status_);
    held_status_.clear();
}

void OutputWriter::emit(std::string_view bytes)
{
    if (bytes.empty())
        return;
    at_line_start_ = bytes.back() == '\n';
    out_.write(bytes);
}

void OutputWriter::after_block()
{
    if (live_)
        return;
    // Each block and its verdict; a verdict can close no live block here.
    std::deque<Held> held = std::move(held_);
    held_.clear();
    for (const auto& h : held) {
        write_block(h.job, h.result, h.output, h.continued);
        if (!h.verdict.empty())
            status(h.verdict, false);
    }
    // GitLab folds a section only if its start says so, written before a
    // live job's verdict is known: there every block waits for its verdict.
    // A job whose live block was closed is not live again: its rest waits.
    if (running_.size() != 1 || ci_ == CiKind::gitlab || continued_.count(running_.begin()->first) != 0)
        return;
    live_ = Live{running_.begin()->first, block_token()};
}

void OutputWriter::on_retry(const Job& job, const JobResult& r, const JobOutput& output)
{
    const std::string verdict = take_verdict(r.index);
    if (mode_ != OutputMode::group) {
        if (!verdict.empty())
            status(verdict, false);
        return;
    }
    running_.erase(r.index);
    continued_.erase(r.index);
    // A try that will be run again gets no annotation, live or not.
    if (live_for(r.index))
        end_live(job, r, output, false);
    if (!verdict.empty())
        status(verdict, false);
    after_block();
}

void OutputWriter::on_finish(const Job& job, const JobResult& r, const JobOutput& output)
{
    const std::string verdict = take_verdict(r.index);
    const auto say_verdict = [this, &verdict] {
        if (!verdict.empty())
            status(verdict, false);
    };
    switch (mode_) {
    case OutputMode::none:
        say_verdict();
        return;
    case OutputMode::stream: {
        const auto it = streams_.find(r.index);
        if (it != streams_.end()) {
            end_lines(it->second);
            streams_.erase(it);
        }
        emit(annotation(ci_, r));
        say_verdict();
        return;
    }
    case OutputMode::failed:
        // Never live: a block is written only once the verdict says it is one.
        if (r.status != JobStatus::passed && r.status != JobStatus::flaky)
            write_block(job, r, output);
        say_verdict();
        return;
    case OutputMode::group: break;
    }
    running_.erase(r.index);
    // The rest of a block whose live part was closed: a block of its own.
    std::uint64_t skip = 0;
    const auto it = continued_.find(r.index);
    const bool continued = it != continued_.end();
    if (continued) {
        skip = it->second;
        continued_.erase(it);
    }
    if (live_for(r.index)) {
        end_live(job, r, output, true);
        say_verdict();
    } else if (live_ || continued) {
        // Kept whole until the live block ends: in memory when small (no
        // descriptor taken from the jobs), else in a spill file of its
        // own, or in memory when none can be had.
        const bool small = output.size() - std::min<std::uint64_t>(skip, output.size()) <= JobOutput::default_memory_limit;
        auto copy = hold_place_ && !small ? JobOutput::reserve(*hold_place_) : Expected<JobOutput>(JobOutput());
        Held h{job, r, copy ? std::move(*copy) : JobOutput(), verdict, continued};
        const auto walked = output.for_each_chunk([&h, &skip](std::string_view chunk) {
            const auto cut = std::min<std::uint64_t>(skip, chunk.size());
            skip -= cut;
            h.output.append(chunk.substr(cut));
            return true;
        });
        if (!walked)
            h.output.append("[pto-par: " + walked.error().message + "]\n");
        held_.push_back(std::move(h));
        if (live_)
            return;
    } else {
        write_block(job, r, output);
        say_verdict();
    }
    after_block();
}

void OutputWriter::write_block(const Job& job, const JobResult& r, const JobOutput& output, bool continued)
{
    // The rest of a closed live block that printed nothing more needs none.
    if (continued && output.size() == 0) {
        emit(annotation(ci_, r));
        return;
    }
    const auto now = static_cast<std::int64_t>(std::time(nullptr));
    const std::string token = block_token();
    Job titled = job;
    if (continued)
        titled.label += " (continued)";
    emit(group_begin(ci_, titled, r, now, token));
    if (tag_) {
        // Every line prefixed as stream does; the last one ended.
        Stream st = tagged(job);
        const auto walked = output.for_each_chunk([this, &st](std::string_view chunk) {
            put_lines(st, chunk);
            return true;
        });
        end_lines(st);
        if (!walked)
            emit("[" + job.label + "] [pto-par: " + walked.error().message + "]\n");
    } else {
        // One call, so the block stays whole: the sink keeps it in order
        // behind whatever it already holds.
        out_.write(output);
        if (output.size() != 0)
            at_line_start_ = output.tail(1) == "\n";
        // A block without a final newline would glue the marker to its last line.
        if (ci_ != CiKind::none && output.size() != 0 && output.tail(1) != "\n")
            emit("\n");
    }
    emit(group_end(ci_, job, now, token));
    emit(annotation(ci_, r));
}

}  // namespace pto::report
