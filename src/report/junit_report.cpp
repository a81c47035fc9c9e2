#include "report/junit_report.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <utility>

#include <pto/devices.hpp>

#include "report/fd_writer.hpp"
#include "report/status_lines.hpp"
#include "common/signal_names.hpp"

namespace pto::report {
namespace {

// Outputs are escaped and copied in pieces of this size, so that a job's
// output of any size costs a bounded amount of memory.
constexpr std::size_t piece_size = 64 * 1024;

std::string fixed(double v, int digits)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

std::string attr(std::string_view name, std::string_view value)
{
    return " " + std::string(name) + "=\"" + xml_escape(value, true) + "\"";
}

// Writes all of a buffer at `offset`, riding out EINTR and short writes.
bool pwrite_all(int fd, std::string_view bytes, std::uint64_t offset)
{
    while (!bytes.empty()) {
        const ssize_t n = pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
        offset += static_cast<std::uint64_t>(n);
    }
    return true;
}

// Collects small writes into large ones; keeps the first errno.
class BufferedWriter {
public:
    explicit BufferedWriter(int fd) : fd_(fd) {}

    void put(std::string_view bytes)
    {
        buf_.append(bytes);
        if (buf_.size() >= piece_size)
            flush();
    }
    void flush()
    {
        if (err_ == 0 && !buf_.empty() && !write_all(fd_, buf_))
            err_ = errno;
        buf_.clear();
    }
    void fail(int err)
    {
        if (err_ == 0)
            err_ = err;
    }
    int error() const { return err_; }

private:
    int fd_;
    std::string buf_;
    int err_ = 0;
};

// An unlinked file in $TMPDIR: nothing to clean up, whatever ends pto-par.
Expected<UniqueFd> make_spool()
{
    const char* env = std::getenv("TMPDIR");
    const std::string dir = env != nullptr && *env != '\0' ? env : "/tmp";
    int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0)
        return UniqueFd(fd);
    // Not every file system has O_TMPFILE: create, then unlink at once.
    std::string name = dir + "/pto-par-junit-XXXXXX";
    fd = mkostemp(name.data(), O_CLOEXEC);
    if (fd < 0)
        return tl::unexpected(sys_error("cannot create a temporary file in " + dir + " (see $TMPDIR)", errno));
    UniqueFd owned(fd);
    if (unlink(name.c_str()) != 0)
        return tl::unexpected(sys_error("cannot unlink temporary file " + name, errno));
    return owned;
}

std::string local_timestamp()
{
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    char buf[32];
    // The JUnit schema's timestamp: ISO 8601, local time, no zone.
    if (localtime_r(&now, &tm) == nullptr || std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        return {};
    return buf;
}

std::string host_name()
{
    char buf[HOST_NAME_MAX + 1] = {};
    if (gethostname(buf, sizeof buf - 1) != 0)
        return {};
    return buf;
}

std::string failure_message(const JobResult& r)
{
    if (r.signal != 0)
        return "killed by " + signal_name(r.signal);
    if (r.exit_code)
        return "exit code " + std::to_string(*r.exit_code);
    if (!r.error.empty())
        return "could not start: " + r.error;
    return "failed";
}

std::string stopped_message(const JobResult& r)
{
    if (r.signal != 0)
        return "stopped by pto-par (" + signal_name(r.signal) + ")";
    if (r.exit_code)
        return "stopped by pto-par (exit code " + std::to_string(*r.exit_code) + ")";
    return "stopped by pto-par";
}

// "timed out: past its 3.0s limit, ended by SIGTERM after 5.0s", as the
// status line and the TIMEOUT report say it.
std::string timeout_message(const JobResult& r)
{
    std::string text = "timed out";
    if (r.time_limit_s > 0)
        text += ": past " + time_limit_text(r);
    text += r.time_limit_s > 0 ? ", " : ": ";
    if (r.signal != 0)
        text += "ended by " + signal_name(r.signal) + " ";
    return text + "after " + fixed(r.duration_s, 1) + "s";
}

}  // namespace

JunitReport::JunitReport(std::string path, std::span<const Job> jobs, std::string suite_name,
                         std::uint64_t output_limit)
    : path_(std::move(path)), suite_(std::move(suite_name)), output_limit_(output_limit)
{
    // A job the run never reports (it ended before it could start) is still
    // a testcase, so every job is accounted for: skipped, until told more.
    cases_.resize(jobs.size());
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        JobResult r;
        r.index = i;
        r.label = jobs[i].label;
        cases_[i].head = testcase_head(jobs[i], r);
    }
}

Expected<void> JunitReport::open()
{
    if (opened_)
        return fail("JUnit report '" + path_ + "' is already open");
    auto out = ReplacedFile::open(path_, "JUnit report");
    if (!out)
        return tl::unexpected(out.error());
    auto spool = make_spool();
    if (!spool)
        return tl::unexpected(spool.error());
    out_ = std::move(*out);
    spool_ = std::move(*spool);
    spool_size_ = 0;
    timestamp_ = local_timestamp();
    hostname_ = host_name();
    opened_ = true;
    return {};
}

std::string JunitReport::testcase_head(const Job& job, const JobResult& r) const
{
    std::string h = "  <testcase" + attr("name", r.label) + attr("classname", suite_) +
                    attr("time", fixed(r.duration_s, 3)) + (r.node.empty() ? "" : attr("hostname", r.node)) + ">\n";
    h += "    <properties>\n";
    const auto property = [&h](std::string_view name, std::string_view value) {
        h += "      <property" + attr("name", name) + attr("value", value) + "/>\n";
    };
    if (job.seq != 0) {
        property("seq", std::to_string(job.seq));
        property("line", std::to_string(job.line));
        property("command", job.command);
    }
    property("devices", r.devices.empty() ? std::string("none") : format_device_range(r.devices));
    if (r.pid > 0)
        property("pid", std::to_string(r.pid));
    if (r.stragglers != 0)
        property("stragglers", r.stragglers > 0 ? std::to_string(r.stragglers) : std::string("unknown"));
    h += "    </properties>\n";

    switch (r.status) {
    case JobStatus::passed: break;
    case JobStatus::flaky: break;  // a passing testcase; its failed tries follow as <flakyFailure>
    case JobStatus::failed: h += "    <failure" + attr("message", failure_message(r)) + "/>\n"; break;
    case JobStatus::timeout:
        h += "    <error" + attr("message", timeout_message(r)) +
             attr("type", "timeout") + "/>\n";
        break;
    case JobStatus::killed:
        h += "    <error" + attr("message", stopped_message(r)) + attr("type", "killed") + "/>\n";
        break;
    case JobStatus::cancelled: h += "    <skipped" + attr("message", "not started") + "/>\n"; break;
    }
    return h;
}

void JunitReport::record(const Job& job, const JobResult& r, const JobOutput* output)
{
    if (!opened_ || r.index >= cases_.size())
        return;
    Case& c = cases_[r.index];
    c.reported = true;
    c.status = r.status;
    c.head = testcase_head(job, r);
    c.note = r.error;
    c.offset = spool_size_;
    c.length = 0;
    if (output == nullptr || output->size() == 0)
        return;

    // Escaped a piece at a time straight into the spool: only the pieces are
    // ever in memory, never the whole output.
    XmlEscaper esc;
    std::string buf;
    std::uint64_t written = 0;
    int write_errno = 0;
    const auto flush = [&] {
        if (!pwrite_all(spool_.get(), buf, c.offset + written)) {
            write_errno = errno;
            return false;
        }
        written += buf.size();
        buf.clear();
        return true;
    };
    // Past the limit: bytes [0, cut) and [resume, size) are kept, the note
    // between them. The cuts move to character boundaries: the head ends
    // after the rest of a character it cut in two, the tail starts after the
    // continuation bytes of one whose start was left out; the note counts
    // exactly the bytes neither shows.
    const std::uint64_t size = output->size();
    const std::uint64_t cut = size > output_limit_ ? output_limit_ / 2 : size;
    const std::uint64_t resume = size > output_limit_ ? size - (output_limit_ - cut) : size;
    const std::uint64_t first = output->discarded();
    std::uint64_t at = first;
    std::uint64_t gap_start = 0;
    bool in_gap = false;
    bool in_tail = false;
    const auto end_gap = [&] {
        buf += "\n[pto-par: " + std::to_string(at - gap_start) + " bytes of output left out]\n";
        in_gap = false;
    };
    const auto continuation = [](char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; };
    const auto walked = output->for_each_chunk([&](std::string_view chunk) {
        while (!chunk.empty()) {
            std::string_view piece = chunk.substr(0, piece_size);
            if (at < cut) {
                piece = piece.substr(0, cut - at);
                esc.feed(piece, buf);
            } else if (!in_gap && !in_tail && esc.mid_character() && continuation(piece[0])) {
                piece = piece.substr(0, 1);
                esc.feed(piece, buf);
            } else if (at < resume || (in_gap && continuation(piece[0]) && at < resume + 3)) {
                if (!in_gap && !in_tail) {
                    in_gap = true;
                    // Bytes discarded by choice past the cut are left out too.
                    gap_start = at == first ? cut : at;
                    esc.finish(buf);
                }
                piece = piece.substr(0, at < resume ? resume - at : 1);
            } else {
                if (in_gap)
                    end_gap();
                in_tail = true;
                esc.feed(piece, buf);
            }
            at += piece.size();
            chunk.remove_prefix(piece.size());
            if (buf.size() >= piece_size && !flush())
                return false;
        }
        return true;
    });
    if (in_gap)
        end_gap();
    if (write_errno == 0) {
        esc.finish(buf);
        flush();
    }
    const auto add_note = [&c](const std::string& text) {
        c.note += (c.note.empty() ? "" : "\n") + text;
    };
    if (write_errno != 0) {
        // What reached the spool may end mid-entity: drop it all; the spool
        // space is reused by the next job.
        const Error e = sys_error("cannot keep the output of job '" + r.label + "' for the JUnit report", write_errno);
        add_note("pto-par: " + e.message);
        if (!error_)
            error_ = e;
        return;
    }
    if (!walked)
        add_note("pto-par: the output is incomplete: " + walked.error().message);
    c.length = written;
    spool_size_ += written;
}

void JunitReport::on_finish(const Job& job, const JobResult& r, const JobOutput& output)
{
    record(job, r, &output);
}

void JunitReport::on_cancel(const Job& job, const JobResult& r)
{
    record(job, r, nullptr);
}

void JunitReport::on_retry(const Job&, const JobResult& r, const JobOutput& output)
{
    if (!opened_ || r.index >= cases_.size())
        return;
    // The try's last 64 KiB: enough to see why it failed, bounded however
    // often a job is tried.
    const std::string tail = output.tail(64 * 1024);
    const bool timed_out = r.status == JobStatus::timeout;
    cases_[r.index].reruns.push_back(
        {timed_out, attr("message", timed_out ? timeout_message(r) : failure_message(r)) +
                        attr("type", timed_out ? "timeout" : "failure"),
         tail.empty() ? std::string() : "<system-out>" + xml_escape(tail) + "</system-out>"});
}

Expected<void> JunitReport::close(double wall_s)
{
    if (!opened_)
        return fail("JUnit report '" + path_ + "' is not open");
    opened_ = false;

    int failures = 0;
    int errors = 0;
    int skipped = 0;
    for (const auto& c : cases_) {
        if (!c.reported || c.status == JobStatus::cancelled)
            ++skipped;
        else if (c.status == JobStatus::failed)
            ++failures;
        else if (c.status == JobStatus::timeout || c.status == JobStatus::killed)
            ++errors;
    }

    BufferedWriter w(out_.fd());
    w.put("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    std::string suite = "<testsuite" + attr("name", suite_) + attr("tests", std::to_string(cases_.size())) +
                        attr("failures", std::to_string(failures)) + attr("errors", std::to_string(errors)) +
                        attr("skipped", std::to_string(skipped)) + attr("time", fixed(wall_s, 3));
    if (!timestamp_.empty())
        suite += attr("timestamp", timestamp_);
    if (!hostname_.empty())
        suite += attr("hostname", hostname_);
    w.put(suite + ">\n");
    if (!suite_properties_.empty()) {
        std::string props = "  <properties>\n";
        for (const auto& [name, value] : suite_properties_)
            props += "    <property" + attr("name", name) + attr("value", value) + "/>\n";
        w.put(props + "  </properties>\n");
    }

    std::string piece(piece_size, '\0');
    for (std::size_t i = 0; i < cases_.size() && w.error() == 0; ++i) {
        const Case& c = cases_[i];
        w.put(c.head);
        for (const auto& rerun : c.reruns) {
            // Flaky, or passed after a try that a sick device failed.
            const bool passed_later = c.status == JobStatus::flaky || c.status == JobStatus::passed;
            const char* name = passed_later ? (rerun.error ? "flakyError" : "flakyFailure")
                                            : (rerun.error ? "rerunError" : "rerunFailure");
            w.put("    <" + std::string(name) + rerun.message + ">" + rerun.body + "</" + name + ">\n");
        }
        if (c.length > 0) {
            w.put("    <system-out>");
            w.flush();
            for (std::uint64_t done = 0; done < c.length && w.error() == 0;) {
                const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(piece.size(), c.length - done));
                const ssize_t n = pread(spool_.get(), piece.data(), want, static_cast<off_t>(c.offset + done));
                if (n < 0 && errno == EINTR)
                    continue;
                if (n <= 0) {
                    w.fail(n < 0 ? errno : EIO);  // 0: the spool shrank under us
                    break;
                }
                w.put(std::string_view(piece.data(), static_cast<std::size_t>(n)));
                done += static_cast<std::uint64_t>(n);
            }
            w.put("</system-out>\n");
        }
        if (!c.note.empty())
            w.put("    <system-err>" + xml_escape(c.note) + "</system-err>\n");
        w.put("  </testcase>\n");
    }
    w.put("</testsuite>\n");
    w.flush();
    spool_.reset();

    if (w.error() != 0) {
        out_.discard();
        return tl::unexpected(sys_error("cannot write JUnit report '" + path_ + "'", w.error()));
    }
    return out_.commit();
}

}  // namespace pto::report
