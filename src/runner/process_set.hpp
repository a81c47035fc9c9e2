// The running jobs and the one place a run blocks: a poll() over the
// signalfd (first, so a flood of output never starves Ctrl-C), every job's
// output pipe, the cgroup.events of jobs whose leader has ended, and the
// caller's poll clients (output sinks waiting for a slow reader). It says
// what happened and decides nothing.
#pragma once

#include <poll.h>

#include <memory>
#include <vector>

#include <pto/error.hpp>
#include <pto/scheduler.hpp>

#include "runner/job_process.hpp"
#include "runner/signal_channel.hpp"

namespace pto::runner {

struct Happened {
    std::vector<int> signals;             // other than SIGCHLD, in arrival order
    std::vector<JobProcess*> readable;    // output waiting, or EOF
    bool children = false;                // some leader ended: see leader_alive()
};

class ProcessSet {
public:
    ProcessSet(SignalChannel& signals, std::vector<PollClient*> clients)
        : signals_(signals), clients_(std::move(clients))
    {
    }
    ~ProcessSet();
    ProcessSet(const ProcessSet&) = delete;
    ProcessSet& operator=(const ProcessSet&) = delete;

    // scancel processes to forget when they are reaped.
    void set_helpers(Helpers* helpers) { helpers_ = helpers; }
    void add(std::unique_ptr<JobProcess> job) { jobs_.push_back(std::move(job)); }
    std::unique_ptr<JobProcess> take(JobProcess* job);
    const std::vector<std::unique_ptr<JobProcess>>& jobs() const { return jobs_; }
    bool empty() const { return jobs_.empty(); }

    // Blocks until something happens or `timeout_ms` passes (-1: no limit).
    // Reaps every child that has ended, marking leaders as it goes; what is
    // reaped that is no leader is an orphan handed to us as subreaper.
    Expected<Happened> wait(int timeout_ms);

    // Reaps without waiting; for the end of the run.
    void reap();

private:
    SignalChannel& signals_;
    std::vector<PollClient*> clients_;
    Helpers* helpers_ = nullptr;
    std::vector<std::unique_ptr<JobProcess>> jobs_;
    // Rebuilt before every poll; kept so that a wake-up allocates nothing.
    std::vector<pollfd> fds_;
    std::vector<JobProcess*> piped_;
    std::vector<PollClient*> polled_clients_;
};

}  // namespace pto::runner
