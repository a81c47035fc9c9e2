#include "report/output_writer.hpp"

#include <ctime>

namespace pto::report {

void OutputWriter::on_output(const Job& job, const JobResult& r, std::string_view bytes)
{
    if (mode_ != OutputMode::stream)
        return;
    std::string& pending = partial_[r.index];
    const std::string_view label = job.label;
    const auto prefix = [this, label] {
        lines_ += '[';
        lines_ += label;
        lines_ += "] ";
    };
    lines_.clear();
    std::size_t start = 0;
    for (std::size_t nl = bytes.find('\n'); nl != std::string_view::npos; nl = bytes.find('\n', start)) {
        prefix();
        lines_ += pending;
        pending.clear();
        lines_.append(bytes.substr(start, nl + 1 - start));
        start = nl + 1;
    }
    pending.append(bytes.substr(start));
    // A line without end must not grow without bound: past the limit it is
    // shown in pieces, each a line of its own.
    while (pending.size() >= stream_line_limit) {
        prefix();
        lines_.append(pending, 0, stream_line_limit);
        lines_ += '\n';
        pending.erase(0, stream_line_limit);
    }
    if (!lines_.empty())
        out_.write(lines_);
}

void OutputWriter::on_finish(const Job& job, const JobResult& r, const JobOutput& output)
{
    switch (mode_) {
    case OutputMode::none:
        return;
    case OutputMode::stream: {
        const auto it = partial_.find(r.index);
        if (it != partial_.end()) {
            if (!it->second.empty())
                out_.write("[" + job.label + "] " + it->second + "\n");
            partial_.erase(it);
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
