// The line kept at the bottom of a terminal while a run goes on, as ninja
// keeps its status line: "[12/80] 3 running: a, b, … · 1 failed · sick: 2 · 2:14".
// Every other line pto-par writes to that terminal (status lines, and job
// output when standard output is the same terminal) first takes it away;
// it comes back at most ten times a second, and once a second for the
// clock while it is shown. An idle run with it off makes no wake-ups; with
// it on, one a second.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pto/error.hpp>
#include <pto/scheduler.hpp>

#include "common/unique_fd.hpp"
#include "output/sink.hpp"

namespace pto::report {

struct Progress {
    std::size_t done = 0;   // ended or cancelled
    std::size_t total = 0;
    std::vector<std::string> running;  // labels as printable() makes them, in start order
    std::size_t failed = 0;  // failed, timed out or killed
    std::vector<int> sick;   // devices whose health check failed
    std::vector<std::string> sick_on_nodes;  // under Slurm: "n1:0", in the order they were found
    double elapsed_s = 0;
    std::string stopping;    // why the run is stopping; empty while it goes on
    std::string waiting;     // "a waits for device 0 (held by another run, pid 1234)"
};

// The line for `p` in at most `width` columns: running labels that do not
// fit become "…", and past that the line itself is cut.
std::string format_progress(const Progress& p, std::size_t width);

class ProgressLine final : public RunObserver, public PollClient {
public:
    // Draws on `terminal` (standard error) through `err`, its sink. `out`:
    // standard output's sink when it shows on the same terminal (its writes
    // take the line away too), else null. Both must outlive this object.
    static Expected<std::unique_ptr<ProgressLine>> open(output::Sink& err, output::Sink* out, int terminal,
                                                        std::size_t total_jobs);
    ~ProgressLine() override;
    ProgressLine(const ProgressLine&) = delete;
    ProgressLine& operator=(const ProgressLine&) = delete;

    // The run is over: the line goes, for good.
    void finish();
    // Drawn only when this says the screen is at the start of a line: a
    // job's line in the making (standard output on the same terminal) would
    // be drawn over, and then erased with the line.
    void set_may_draw(std::function<bool()> may) { may_draw_ = std::move(may); }

    void on_start(const Job&, const JobResult&) override;
    void on_finish(const Job&, const JobResult&, const JobOutput&) override;
    void on_cancel(const Job&, const JobResult&) override;
    void on_retry(const Job&, const JobResult&, const JobOutput&) override;
    void on_device_sick(const std::string& node, int device, const std::string&, const JobOutput&) override;
    void on_stopping(const char* reason) override;
    void on_signal(int sig) override;  // SIGWINCH, SIGCONT: draw again
    void on_waiting(const Job& job, const std::string& what) override;

    // The timer that paces the drawing.
    int poll_fd() const override { return timer_.get(); }
    short poll_events() const override;
    void on_ready(short revents) override;

private:
    using Clock = std::chrono::steady_clock;

    ProgressLine(output::Sink& err, output::Sink* out, int terminal, std::size_t total, UniqueFd timer);

    void changed();
    void draw();
    void erase();
    void arm(Clock::time_point at);
    bool shown_here() const;
    std::size_t width() const;
    void stopped_running(std::size_t index);

    output::Sink& err_;
    output::Sink* out_;
    int terminal_;
    UniqueFd timer_;
    Clock::time_point began_ = Clock::now();
    Clock::time_point last_draw_{};
    std::optional<Clock::time_point> armed_;
    bool visible_ = false;   // the line is on the screen now
    bool drawing_ = false;   // our own write: not a reason to erase
    bool dirty_ = true;
    bool finished_ = false;
    Progress state_;
    std::function<bool()> may_draw_;
    std::vector<std::size_t> running_index_;  // the job index of each of state_.running
    std::string waiting_label_;  // of the job state_.waiting is about
};

}  // namespace pto::report
