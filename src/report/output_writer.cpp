#include "report/output_writer.hpp"

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
        return;
    }
    case OutputMode::failed:
        if (r.status == JobStatus::passed)
            return;
        [[fallthrough]];
    case OutputMode::group:
        // One call, so the block stays whole: the sink keeps it in order
        // behind whatever it already holds.
        out_.write(output);
        return;
    }
}

}  // namespace pto::report
