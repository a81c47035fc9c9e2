#include "report/progress_line.hpp"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/timerfd.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <pto/devices.hpp>

#include "common/text.hpp"

namespace pto::report {
namespace {

// Redrawn at most this often: a terminal that gets a new line for every
// one of thousands of short jobs spends its time drawing, not showing.
constexpr auto min_interval = std::chrono::milliseconds(100);
constexpr std::string_view ellipsis = "\xE2\x80\xA6";  // …
constexpr std::string_view dot = " \xC2\xB7 ";          // " · "
constexpr std::string_view erase_line = "\r\x1b[K";

std::string clock_text(double seconds)
{
    const auto s = static_cast<long long>(seconds);
    char buf[48];
    if (s >= 3600)
        std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
    else
        std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
    return buf;
}

}  // namespace

std::string format_progress(const Progress& p, std::size_t width)
{
    std::string head = "[" + std::to_string(p.done) + "/" + std::to_string(p.total) + "] ";
    if (!p.stopping.empty())
        head += "stopping (" + p.stopping + "): ";
    head += std::to_string(p.running.size()) + " running";
    std::string tail;
    if (p.failed > 0)
        tail += std::string(dot) + std::to_string(p.failed) + " failed";
    if (!p.sick.empty())
        tail += std::string(dot) + "sick: " + format_device_range(p.sick);
    if (!p.sick_on_nodes.empty()) {
        tail += std::string(dot) + "sick:";
        for (const auto& name : p.sick_on_nodes)
            tail += " " + name;
    }
    if (!p.waiting.empty())
        tail += std::string(dot) + p.waiting;
    tail += std::string(dot) + clock_text(p.elapsed_s);

    // The labels that fit, in start order; the rest is one "…".
    const std::size_t fixed = text::columns(head) + text::columns(tail);
    std::string labels;
    std::size_t used = 0;
    for (std::size_t i = 0; i < p.running.size(); ++i) {
        const std::string_view sep = i == 0 ? ": " : ", ";
        const std::size_t need = sep.size() + text::columns(p.running[i]);
        // Room for this label, and for ", …" after it unless it is the last.
        const std::size_t after = i + 1 < p.running.size() ? 3 : 0;
        if (fixed + used + need + after > width) {
            labels += (i == 0 ? ": " : ", ") + std::string(ellipsis);
            break;
        }
        labels += std::string(sep) + p.running[i];
        used += need;
    }
    std::string line = head + labels + tail;
    if (text::columns(line) <= width)
        return line;
    if (width == 0)
        return {};
    return std::string(text::cut_to_columns(line, width - 1)) + std::string(ellipsis);
}

Expected<std::unique_ptr<ProgressLine>> ProgressLine::open(output::Sink& err, output::Sink* out, int terminal,
                                                           std::size_t total_jobs)
{
    UniqueFd timer(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    if (!timer)
        return tl::unexpected(sys_error("timerfd_create (for the progress line)", errno));
    return std::unique_ptr<ProgressLine>(new ProgressLine(err, out, terminal, total_jobs, std::move(timer)));
}

ProgressLine::ProgressLine(output::Sink& err, output::Sink* out, int terminal, std::size_t total, UniqueFd timer)
    : err_(err), out_(out), terminal_(terminal), timer_(std::move(timer))
{
    state_.total = total;
    const auto hook = [this] { erase(); };
    err_.set_before_write(hook);
    if (out_ != nullptr)
        out_->set_before_write(hook);
    changed();
}

ProgressLine::~ProgressLine()
{
    finish();
}

void ProgressLine::finish()
{
    if (finished_)
        return;
    finished_ = true;
    erase();
    err_.set_before_write({});
    if (out_ != nullptr)
        out_->set_before_write({});
}

short ProgressLine::poll_events() const
{
    return POLLIN;
}

// Shown when the terminal is ours to draw on: pto-par is in its foreground
// (not a background job of the shell, whose prompt it would overwrite).
// With --progress always on something that is no terminal: always.
bool ProgressLine::shown_here() const
{
    const pid_t fg = tcgetpgrp(terminal_);
    return fg < 0 || fg == getpgrp();
}

std::size_t ProgressLine::width() const
{
    // Read at every draw (at most ten a second), so a resize is never
    // missed between SIGWINCH and the next draw.
    winsize ws{};
    if (ioctl(terminal_, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    if (const char* c = std::getenv("COLUMNS"); c != nullptr) {
        char* end = nullptr;
        const long v = std::strtol(c, &end, 10);
        if (end != c && *end == '\0' && v > 0 && v < 10000)
            return static_cast<std::size_t>(v);
    }
    return 80;
}

void ProgressLine::arm(Clock::time_point at)
{
    if (armed_ && *armed_ <= at)
        return;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
    itimerspec spec{};
    spec.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
    spec.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
    if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0)
        spec.it_value.tv_nsec = 1;  // all zero would disarm it
    // steady_clock is CLOCK_MONOTONIC, so an absolute time in the past fires
    // at once. Failing (it cannot with a valid timer), the line is only
    // drawn on the next event: nothing else depends on it.
    if (timerfd_settime(timer_.get(), TFD_TIMER_ABSTIME, &spec, nullptr) == 0)
        armed_ = at;
}

// Something to show: drawn as soon as the pace allows, after the event
// that caused it has written its own lines.
void ProgressLine::changed()
{
    if (finished_)
        return;
    dirty_ = true;
    arm(std::max(Clock::now(), last_draw_ + min_interval));
}

void ProgressLine::on_ready(short)
{
    std::uint64_t expirations = 0;
    // EAGAIN: woken for nothing (re-armed meanwhile); the draw below is harmless.
    (void)!read(timer_.get(), &expirations, sizeof expirations);
    armed_.reset();
    if (finished_)
        return;
    draw();
    // The clock shown moves on at every whole second of the run.
    if (visible_ || dirty_) {
        const auto elapsed = Clock::now() - began_;
        const auto next = std::chrono::floor<std::chrono::seconds>(elapsed) + std::chrono::seconds(1);
        arm(began_ + next);
    }
}

void ProgressLine::draw()
{
    // A reader that has not taken what is queued (a paused terminal) gets
    // no more from us; the next second tries again.
    if (err_.pending() != 0 || (out_ != nullptr && out_->pending() != 0))
        return;
    if (may_draw_ && !may_draw_())
        return;  // the next event or second looks again
    if (!shown_here()) {
        // A background job: nothing drawn and no clock. SIGCONT (fg) or
        // the next event looks again.
        dirty_ = false;
        return;
    }
    state_.elapsed_s = std::chrono::duration<double>(Clock::now() - began_).count();
    // One column short of the width: a line that fills the last column
    // makes some terminals wrap, and the next \r would not come back up.
    const std::size_t cols = width();
    std::string line(erase_line.substr(0, 1));
    line += format_progress(state_, cols > 1 ? cols - 1 : 1);
    line += erase_line.substr(1);
    drawing_ = true;
    err_.write(line);
    drawing_ = false;
    visible_ = true;
    dirty_ = false;
    last_draw_ = Clock::now();
}

// The Sinks' hook: any other line first takes the progress line away.
void ProgressLine::erase()
{
    if (!visible_ || drawing_)
        return;
    visible_ = false;
    drawing_ = true;
    err_.write(erase_line);
    drawing_ = false;
    changed();
}

void ProgressLine::stopped_running(std::size_t index)
{
    const auto at = std::find(running_index_.begin(), running_index_.end(), index);
    if (at == running_index_.end())
        return;
    state_.running.erase(state_.running.begin() + (at - running_index_.begin()));
    running_index_.erase(at);
}

void ProgressLine::on_start(const Job&, const JobResult& r)
{
    if (r.label == waiting_label_)
        state_.waiting.clear();
    state_.running.push_back(text::printable(r.label));
    running_index_.push_back(r.index);
    changed();
}

void ProgressLine::on_finish(const Job&, const JobResult& r, const JobOutput&)
{
    stopped_running(r.index);
    ++state_.done;
    if (r.status != JobStatus::passed && r.status != JobStatus::flaky && r.status != JobStatus::cancelled)
        ++state_.failed;
    changed();
}

void ProgressLine::on_waiting(const Job& job, const std::string& what)
{
    waiting_label_ = job.label;
    state_.waiting = text::printable(job.label) + " waits for " + text::printable(what);
    changed();
}

void ProgressLine::on_cancel(const Job&, const JobResult&)
{
    ++state_.done;
    changed();
}

void ProgressLine::on_device_sick(const std::string& node, int device, const std::string&, const JobOutput&)
{
    if (!node.empty())
        state_.sick_on_nodes.push_back(text::printable(node) + ":" + std::to_string(device));
    else
        state_.sick.insert(std::upper_bound(state_.sick.begin(), state_.sick.end(), device), device);
    changed();
}

void ProgressLine::on_retry(const Job&, const JobResult& r, const JobOutput&)
{
    stopped_running(r.index);  // queued again, at the head
    changed();
}

void ProgressLine::on_stopping(const char* reason)
{
    state_.stopping = reason;
    changed();
}

void ProgressLine::on_signal(int sig)
{
    if (sig == SIGWINCH || sig == SIGCONT)
        changed();
}

}  // namespace pto::report
