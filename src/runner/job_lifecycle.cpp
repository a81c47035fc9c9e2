#include "runner/job_lifecycle.hpp"

#include <csignal>

namespace pto::runner {

void JobLifecycle::time_out(Signallable& job, Clock::time_point now)
{
    timed_out_ = true;
    dump_at_ = now + times_->dump_grace;
    // Python's faulthandler.register(SIGUSR1) and similar print their stacks
    // on it; the pipe is read on through the dump grace to catch them.
    job.signal(SIGUSR1);
    last_signal_ = SIGUSR1;
}

void JobLifecycle::stop(Signallable& job, Clock::time_point now, bool force)
{
    if (force) {
        if (stage_ == StopStage::none || stage_ == StopStage::terminating) {
            job.kill_all();
            last_signal_ = SIGKILL;
            stage_ = StopStage::killing;
            stage_deadline_ = now + times_->wait_after_kill;
        }
        return;
    }
    if (stage_ == StopStage::none) {
        job.signal(SIGTERM);
        // A stopped process would sit on SIGTERM until the SIGKILL.
        job.signal(SIGCONT);
        last_signal_ = SIGTERM;
        stage_ = StopStage::terminating;
        stage_deadline_ = now + times_->kill_grace;
    }
}

JobLifecycle::Due JobLifecycle::advance(Signallable& job, Clock::time_point now, bool leader_alive, bool empty)
{
    if (limit_ && !timed_out_ && leader_alive && stage_ == StopStage::none && now >= *limit_)
        time_out(job, now);
    if (timed_out_ && !dumped_ && now >= dump_at_)
        return Due::dump;
    if (now < stage_deadline_)
        return Due::nothing;
    if (stage_ == StopStage::terminating) {
        job.kill_all();
        last_signal_ = SIGKILL;
        stage_ = StopStage::killing;
        stage_deadline_ = now + times_->wait_after_kill;
    } else if (stage_ == StopStage::killing && !empty) {
        return Due::quarantine;
    }
    return Due::nothing;
}

std::optional<Clock::time_point> JobLifecycle::next_deadline(bool leader_alive) const
{
    std::optional<Clock::time_point> first;
    const auto consider = [&first](Clock::time_point t) {
        if (!first || t < *first)
            first = t;
    };
    if (stage_ == StopStage::terminating || stage_ == StopStage::killing)
        consider(stage_deadline_);
    if (timed_out_ && !dumped_)
        consider(dump_at_);
    else if (limit_ && !timed_out_ && leader_alive && stage_ == StopStage::none)
        consider(*limit_);
    return first;
}

}  // namespace pto::runner
