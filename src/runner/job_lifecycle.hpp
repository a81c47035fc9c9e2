// How far stopping one job has gone, and when its next step is due: its
// time limit, the dump grace after SIGUSR1, SIGTERM's grace, the wait after
// SIGKILL. It signals the job it drives and tells the loop what only the
// loop can do (deliver the TIMEOUT report, withhold the devices); it decides
// nothing about other jobs.
#pragma once

#include <optional>

#include "runner/clock.hpp"

namespace pto::runner {

enum class StopStage {
    none,        // left alone
    terminating, // SIGTERM (and SIGCONT) sent; SIGKILL when the grace ends
    killing,     // SIGKILL sent; quarantined if anything is left when the wait ends
    abandoned,   // something survived SIGKILL: its devices are withheld
};

struct StopTimes {
    Clock::duration kill_grace{};       // SIGTERM -> SIGKILL
    Clock::duration dump_grace{};       // SIGUSR1 -> the stop
    Clock::duration wait_after_kill{};  // SIGKILL -> quarantine
};

// What a lifecycle does to its job (JobProcess; a fake in tests).
class Signallable {
public:
    virtual void signal(int sig) const = 0;  // to everything of the job
    virtual void kill_all() const = 0;

protected:
    ~Signallable() = default;
};

class JobLifecycle {
public:
    explicit JobLifecycle(const StopTimes& times) : times_(&times) {}

    void set_limit(Clock::time_point at) { limit_ = at; }
    void clear_limit() { limit_.reset(); }

    StopStage stage() const { return stage_; }
    bool timed_out() const { return timed_out_; }
    bool dumped() const { return dumped_; }
    // The last signal it sent the job (SIGUSR1, SIGTERM, SIGKILL), 0 if none.
    int last_signal() const { return last_signal_; }
    // Its end is pto-par's doing (a stop it did not ask for).
    bool stopped_by_us() const { return stopped_by_us_; }
    void set_stopped_by_us(bool v) { stopped_by_us_ = v; }

    // Its time, or the run's, is up: SIGUSR1, so that it prints its stacks
    // during the dump grace.
    void time_out(Signallable& job, Clock::time_point now);
    // SIGTERM and SIGCONT, SIGKILL when the grace ends; with `force`,
    // SIGKILL now. Once started, a stop only ever hurries.
    void stop(Signallable& job, Clock::time_point now, bool force);
    void dump_delivered() { dumped_ = true; }
    void abandon() { stage_ = StopStage::abandoned; }

    enum class Due {
        nothing,
        dump,        // the dump grace is over: deliver the TIMEOUT report, then stop it
        quarantine,  // something of it survived SIGKILL
    };
    // Takes the steps due by `now` that are its own (the time limit, SIGKILL
    // after the grace) and says what is due of the loop.
    Due advance(Signallable& job, Clock::time_point now, bool leader_alive, bool empty);
    // When advance() has something to do next; nothing if only an event can.
    std::optional<Clock::time_point> next_deadline(bool leader_alive) const;

private:
    const StopTimes* times_;
    StopStage stage_ = StopStage::none;
    Clock::time_point stage_deadline_{};
    std::optional<Clock::time_point> limit_;
    bool timed_out_ = false;
    bool dumped_ = false;
    Clock::time_point dump_at_{};
    bool stopped_by_us_ = false;
    int last_signal_ = 0;
};

}  // namespace pto::runner
