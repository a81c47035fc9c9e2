#include "report/output_writer.hpp"

#include <cerrno>

#include "report/fd_writer.hpp"

namespace pto::report {

void OutputWriter::emit(std::string_view bytes)
{
    if (reader_gone_ || bytes.empty())
        return;
    if (!write_all(fd_, bytes))
        reader_gone_ = true;  // EPIPE or worse: the jobs go on regardless
}

void OutputWriter::on_output(const Job&, const JobResult& r, std::string_view bytes)
{
    if (mode_ != OutputMode::stream)
        return;
    std::string& pending = partial_[r.index];
    const std::string prefix = "[" + r.label + "] ";
    std::string out;
    std::size_t start = 0;
    for (std::size_t nl = bytes.find('\n'); nl != std::string_view::npos; nl = bytes.find('\n', start)) {
        out += prefix;
        out += pending;
        pending.clear();
        out.append(bytes.substr(start, nl + 1 - start));
        start = nl + 1;
    }
    pending.append(bytes.substr(start));
    // A line without end must not grow without bound: past the limit it is
    // shown in pieces, each a line of its own.
    while (pending.size() >= stream_line_limit) {
        out += prefix;
        out.append(pending, 0, stream_line_limit);
        out += '\n';
        pending.erase(0, stream_line_limit);
    }
    emit(out);
}

void OutputWriter::on_finish(const Job&, const JobResult& r, const JobOutput& output)
{
    switch (mode_) {
    case OutputMode::none:
        return;
    case OutputMode::stream: {
        const auto it = partial_.find(r.index);
        if (it != partial_.end()) {
            if (!it->second.empty())
                emit("[" + r.label + "] " + it->second + "\n");
            partial_.erase(it);
        }
        return;
    }
    case OutputMode::failed:
        if (r.status == JobStatus::passed)
            return;
        [[fallthrough]];
    case OutputMode::group:
        (void)output.for_each_chunk([this](std::string_view chunk) {
            emit(chunk);
            return !reader_gone_;
        });
        return;
    }
}

}  // namespace pto::report
