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

char* put(char* at, std::string_view bytes)
{
    std::memcpy(at, bytes.data(), bytes.size());
    return at + bytes.size();
}

}  // namespace

// A chunk of a megabyte holds thousands of lines: each costs one memchr
// and two copies (its prefix, its bytes) into one buffer, written once.
// Appending to a std::string piece by piece, five pieces a line each with
// its size check, cost a third more: under callgrind, 100 MB of 128-byte
// lines took the runner 161 M instructions that way, 108 M this way
// (--output none: 12 M).
void OutputWriter::on_output(const Job& job, const JobResult& r, std::string_view bytes)
{
    if (mode_ != OutputMode::stream || bytes.empty())
        return;
    Stream& st = streams_[r.index];
    if (st.prefix.empty())
        st.prefix = "[" + job.label + "] ";
    std::string& pending = st.partial;
    const std::string_view prefix = st.prefix;
    std::size_t used = 0;
    // Room for `n` more bytes after `used`; the buffer only grows, and its
    // old bytes need no keeping beyond `used`.
    const auto room = [this, &used](std::size_t n) {
        if (used > 0 && used + n > lines_flush_at) {
            out_.write(std::string_view(lines_.data(), used));
            used = 0;
        }
        if (lines_.size() < used + n)
            lines_.resize(std::max(used + n, 2 * lines_.size()));
        return lines_.data() + used;
    };
    const char* from = bytes.data();
    const char* const end = from + bytes.size();
    const auto next_newline = [&from, end] {
        return static_cast<const char*>(std::memchr(from, '\n', static_cast<std::size_t>(end - from)));
    };
    const char* nl = next_newline();
    if (nl != nullptr && !pending.empty()) {
        // The line an earlier chunk began ends here.
        const std::string_view line(from, static_cast<std::size_t>(nl + 1 - from));
        char* at = room(prefix.size() + pending.size() + line.size());
        at = put(put(put(at, prefix), pending), line);
        used = static_cast<std::size_t>(at - lines_.data());
        pending.clear();
        from = nl + 1;
        nl = next_newline();
    }
    for (; nl != nullptr; nl = next_newline()) {
        const std::string_view line(from, static_cast<std::size_t>(nl + 1 - from));
        char* at = room(prefix.size() + line.size());
        at = put(put(at, prefix), line);
        used = static_cast<std::size_t>(at - lines_.data());
        from = nl + 1;
    }
    pending.append(from, end);
    // A line without end must not grow without bound: past the limit it is
    // shown in pieces, each a line of its own.
    std::size_t cut = 0;
    for (; pending.size() - cut >= stream_line_limit; cut += stream_line_limit) {
        char* at = room(prefix.size() + stream_line_limit + 1);
        at = put(put(at, prefix), std::string_view(pending).substr(cut, stream_line_limit));
        *at++ = '\n';
        used = static_cast<std::size_t>(at - lines_.data());
    }
    pending.erase(0, cut);
    if (used > 0)
        out_.write(std::string_view(lines_.data(), used));
}

void OutputWriter::on_finish(const Job& job, const JobResult& r, const JobOutput& output)
{
    switch (mode_) {
    case OutputMode::none:
        return;
    case OutputMode::stream: {
        const auto it = streams_.find(r.index);
        if (it != streams_.end()) {
            if (!it->second.partial.empty())
                out_.write(it->second.prefix + it->second.partial + "\n");
            streams_.erase(it);
        }
        out_.write(annotation(ci_, r));
        return;
    }
    case OutputMode::failed:
        if (r.status == JobStatus::passed || r.status == JobStatus::flaky)
            return;
        [[fallthrough]];
    case OutputMode::group: {
        const auto now = static_cast<std::int64_t>(std::time(nullptr));
        out_.write(group_begin(ci_, job, r, now));
        // One call, so the block stays whole: the sink keeps it in order
        // behind whatever it already holds.
        out_.write(output);
        // A block without a final newline would glue the marker to its last line.
        if (ci_ != CiKind::none && output.size() != 0 && output.tail(1) != "\n")
            out_.write("\n");
        out_.write(group_end(ci_, job, now));
        out_.write(annotation(ci_, r));
        return;
    }
    }
}

}  // namespace pto::report
