#include "runner/process_set.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <csignal>

#include "runner/process_group.hpp"

namespace pto::runner {

// As ninja's SubprocessSet::Clear: every job is killed before any is
// waited for, and all are waited for at once, so that N stuck ones cost
// one wait, not N.
ProcessSet::~ProcessSet()
{
    std::vector<pid_t> leaders;
    std::vector<JobProcess*> of;
    for (const auto& j : jobs_) {
        if (!j->empty())
            j->kill_all();
        if (j->leader_alive() && j->life.stage() != StopStage::abandoned) {
            leaders.push_back(j->pid());
            of.push_back(j.get());
        }
    }
    const auto status = reap_all_within(leaders, teardown_wait_ms);
    for (std::size_t i = 0; i < of.size(); ++i) {
        if (status[i])
            of[i]->leader_exited(*status[i]);
        else
            of[i]->life.abandon();  // left to the kernel: its destructor does not wait again
    }
}

std::unique_ptr<JobProcess> ProcessSet::take(JobProcess* job)
{
    const auto it = std::find_if(jobs_.begin(), jobs_.end(), [job](const auto& j) { return j.get() == job; });
    if (it == jobs_.end())
        return nullptr;
    auto owned = std::move(*it);
    jobs_.erase(it);
    return owned;
}

void ProcessSet::reap()
{
    for (;;) {
        int status = 0;
        const pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;  // 0: none left exited; ECHILD: no children at all
        bool leader = false;
        for (auto& j : jobs_)
            if (j->pid() == pid && j->leader_alive()) {
                j->leader_exited(status);
                leader = true;
                break;
            }
        if (!leader && helpers_ != nullptr)
            (void)helpers_->forget(pid);  // false: an orphan of a job, nothing to do
    }
}

Expected<Happened> ProcessSet::wait(int timeout_ms)
{
    // Layout: [signalfd][pipes...][cgroup events...][clients...]
    fds_.clear();
    fds_.push_back({signals_.fd(), POLLIN, 0});
    piped_.clear();
    const auto now = Clock::now();
    auto wake = Clock::time_point::max();
    for (auto& j : jobs_)
        if (j->output_fd() >= 0) {
            if (j->resting_until() > now) {
                wake = std::min(wake, j->resting_until());
                continue;
            }
            fds_.push_back({j->output_fd(), POLLIN, 0});
            piped_.push_back(j.get());
        }
    // Only once the leader has ended does the cgroup's emptying matter; its
    // events file was read then (JobProcess::empty), so this poll sleeps
    // until `populated` changes.
    for (auto& j : jobs_)
        if (!j->leader_alive() && j->cgroup() != nullptr)
            fds_.push_back({j->cgroup()->events_fd(), POLLPRI, 0});
    const std::size_t first_client = fds_.size();
    polled_clients_.clear();
    for (auto* c : clients_)
        if (c->poll_fd() >= 0) {
            fds_.push_back({c->poll_fd(), c->poll_events(), 0});
            polled_clients_.push_back(c);
        }

    Happened what;
    // A resting pipe is looked at again when its rest ends, to the
    // microsecond (poll's milliseconds would be ten rests).
    timespec limit{};
    const timespec* until = nullptr;
    auto wait_for = timeout_ms < 0 ? Clock::duration::max() : Clock::duration(std::chrono::milliseconds(timeout_ms));
    if (wake != Clock::time_point::max())
        wait_for = std::min(wait_for, wake - now);
    if (wait_for != Clock::duration::max()) {
        const auto ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::max(wait_for, Clock::duration::zero()));
        limit.tv_sec = static_cast<time_t>(ns.count() / 1000000000);
        limit.tv_nsec = static_cast<long>(ns.count() % 1000000000);
        until = &limit;
    }
    const int n = ppoll(fds_.data(), fds_.size(), until, nullptr);
    if (n < 0) {
        if (errno == EINTR)
            return what;
        return tl::unexpected(sys_error("poll", errno));
    }
    if (n == 0)
        return what;
    if (fds_[0].revents != 0) {
        auto sigs = signals_.drain();
        if (!sigs)
            return tl::unexpected(sigs.error());
        for (int sig : *sigs) {
            if (sig == SIGCHLD)
                what.children = true;
            else
                what.signals.push_back(sig);
        }
    }
    if (what.children)
        reap();
    for (std::size_t i = 0; i < piped_.size(); ++i)
        if (fds_[1 + i].revents != 0)
            what.readable.push_back(piped_[i]);
    for (std::size_t i = 0; i < polled_clients_.size(); ++i)
        if (fds_[first_client + i].revents != 0)
            polled_clients_[i]->on_ready(fds_[first_client + i].revents);
    return what;
}

}  // namespace pto::runner
