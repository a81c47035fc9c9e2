// Stopping jobs: fail-fast, signals, time limits and their deadlines, what
// survives SIGKILL, and what left its job's process group.
#include "runner/run.hpp"

#include <unistd.h>

#include <algorithm>
#include <csignal>

#include <pto/devices.hpp>

#include "runner/clock.hpp"
#include "runner/process_group.hpp"

namespace pto::runner {

// The run starts nothing more from here on: it waits for no other run's
// lease either, so that those runs stop leaving them to it.
void Run::begin_stopping(const char* reason)
{
    if (stopping_)
        return;
    stopping_ = true;
    placement_.stop_waiting();
    if (opt_.observer != nullptr)
        opt_.observer->on_stopping(reason);
}

void Run::stop_all(const char* reason)
{
    begin_stopping(reason);
    for (auto& j : set_.jobs()) {
        if (j->leader_alive())
            j->life.set_stopped_by_us(true);
        stop(*j);
    }
}

void Run::stop(JobProcess& j)
{
    // A step Slurm has not created yet never ran: srun is killed (its helper
    // cancels the pending step) and the job is cancelled, at once. Its
    // header may be in the pipe already, unread: looked at first.
    if (j.step() != nullptr && !j.start_reported && !j.holding)
        read(j, 0);
    if (j.holding || (j.step() != nullptr && j.step()->holding())) {
        // It lets its GPUs go at SIGTERM (a step that is about to hold
        // them too: its job's end is taken when the loop looks next).
        j.life.stop(j, Clock::now(), force_kill_);
        return;
    }
    if (j.step() != nullptr && !j.start_reported && !j.step()->created() && (j.cancelled_pending || !was_created(j))) {
        if (j.life.stage() == StopStage::none || j.life.stage() == StopStage::terminating) {
            j.cancelled_pending = true;
            j.life.stop(j, Clock::now(), true);
        }
        return;
    }
    j.life.stop(j, Clock::now(), force_kill_);
}

// Whether Slurm has created the step of `j` though its header has not come
// (srun passes the task's output on late): its line may run, so it is
// stopped as a running step. squeue is asked once for all the steps one
// stop looks at, in the loop (tens of milliseconds, at most two seconds);
// when it cannot say, the step is taken for a pending one, as before.
bool Run::was_created(JobProcess& j)
{
    const auto now = Clock::now();
    if (created_at_ == Clock::time_point{} || now - created_at_ > std::chrono::milliseconds(200)) {
        auto steps = created_steps(*opt_.slurm, ctx_);
        created_ = steps ? std::move(*steps) : std::vector<std::string>();
        created_at_ = now;
    }
    const std::string suffix = " " + j.step()->name();
    for (const auto& line : created_)
        if (line.ends_with(suffix)) {
            j.step()->set_created(line.substr(0, line.size() - suffix.size()));
            return true;
        }
    return false;
}

// The node of `grant` can start no job any more (`why`): said once, and the
// steps still waiting for Slurm there, which never ran, go to other nodes.
void Run::node_lost(const placement::Grant& grant, const std::string& why)
{
    notice("node " + grant.node + " taken out of the pool for the rest of the run: " + why +
           "; its jobs are tried on the other nodes");
    for (auto& j : set_.jobs()) {
        const bool waiting = j->step() != nullptr && !j->holding && !j->step()->holding() && !j->start_reported &&
                             !j->step()->created() && j->life.stage() == StopStage::none;
        if (waiting && grants_[j->index()].node_index == grant.node_index && !was_created(*j)) {
            j->relaunch = true;
            j->cancelled_pending = true;
            j->life.stop(*j, Clock::now(), true);
        }
    }
}

// A step that stays until the run ends (holding a sick GPU, or past
// stopping) keeps its GPUs and a CPU of its node.
void Run::withhold_step(const placement::Grant& grant)
{
    if (placement_.withhold(grant))
        node_lost(grant, "the steps that stay there until the run ends (holding a sick GPU, or that could not be "
                         "stopped) keep all its CPUs");
}

void Run::deliver_dump(JobProcess& j)
{
    JobResult& res = results_[j.index()];
    const Job& job = jobs_[j.index()];
    if (!res.run_time_limit)
        res.time_limit_s = job.timeout_s.value_or(opt_.job_timeout_s.value_or(0));
    j.life.dump_delivered();
    read(j, 0);
    j.output().settle();
    if (opt_.observer != nullptr)
        opt_.observer->on_timeout(jobs_[j.index()], results_[j.index()], j.output(), seconds(Clock::now() - j.started()));
}

// Something of `j` survived SIGKILL: finish its report, keep its devices out
// of the pool for good, and cancel what can no longer fit.
void Run::quarantine(JobProcess& j)
{
    j.life.abandon();
    if (j.holding) {
        const std::string what = describe_processes(j.members());
        notice("a step holding a sick GPU on node " + j.step()->node() + " could not be stopped (" +
               (what.empty() ? std::string("srun") : what) + ")");
        abandoned_.push_back(set_.take(&j));
        return;
    }
    if (j.is_check()) {
        const std::string what = describe_processes(j.members());
        auto check = set_.take(&j);
        check_ended(*check, "it could not be stopped (" + (what.empty() ? std::string("its processes") : what) + ")");
        abandoned_.push_back(std::move(check));
        return;
    }
    JobResult& res = results_[j.index()];
    const auto devices = res.devices;
    const std::string what = describe_processes(j.members());
    if (!j.exit_handled)
        res.status = j.life.timed_out() ? JobStatus::timeout : JobStatus::killed;
    res.stragglers = 0;  // none was stopped; the error names what is left
    res.error = "could not be stopped (" + (what.empty() ? std::string("its processes") : what) + "); devices " +
                (devices.empty() ? std::string("none") : format_device_range(devices)) +
                " withheld for the rest of the run";
    notice("job '" + jobs_[j.index()].label + "' " + res.error);
    if (j.step() != nullptr)
        withhold_step(grants_[j.index()]);
    else
        (void)placement_.withhold(grants_[j.index()]);  // false: a local pool has no CPUs to run out of
    withheld_.insert(withheld_.end(), devices.begin(), devices.end());
    std::sort(withheld_.begin(), withheld_.end());
    read(j, 0);
    end_try(j);
    report(j, true);
    abandoned_.push_back(set_.take(&j));
    cancel_unfittable();
}

// Jobs waiting for more devices than the placement can still give would
// wait for ever: they are cancelled, saying why.
void Run::cancel_unfittable()
{
    queue_.drop_unless([this](std::size_t i) { return placement_.usable_for(need(i)); },
                       [this](std::size_t i, bool retry) {
                           results_[i].error = retry ? "cannot run again: " + placement_.shortfall(need(i))
                                                     : placement_.shortfall(need(i)) + " (" + why_unusable() + ")";
                           if (opt_.observer != nullptr)
                               opt_.observer->on_cancel(jobs_[i], results_[i]);
                       });
}

// "devices 2-3 withheld; device 1 sick"
std::string Run::why_unusable() const
{
    std::string why;
    if (!withheld_.empty())
        why = "devices " + format_device_range(withheld_) + " withheld";
    if (!sick_.empty())
        why += std::string(why.empty() ? "" : "; ") + (sick_.size() == 1 ? "device " : "devices ") +
               format_device_range(sick_) + " sick";
    if (const auto& out = placement_.left_out(); !out.empty())
        why += std::string(why.empty() ? "" : "; ") + (out.size() == 1 ? "device " : "devices ") +
               format_device_range(out) + " left out, its lease file unusable";
    for (const auto& d : sick_on_nodes_)
        why += std::string(why.empty() ? "" : "; ") + "GPU " + d.node + ":" + std::to_string(d.id) + " sick";
    return why;
}

void Run::check_deadlines(Clock::time_point now)
{
    if (run_deadline_ && !run_timed_out_ && now >= *run_deadline_) {
        run_timed_out_ = true;
        begin_stopping("the run's time limit");
        for (auto& j : set_.jobs()) {
            if (j->is_check() || j->holding) {
                j->life.set_stopped_by_us(true);
                stop(*j);
            } else if (j->leader_alive() && j->life.stage() == StopStage::none && !j->life.timed_out()) {
                if (j->step() != nullptr && !j->start_reported) {
                    stop(*j);  // it never ran: there are no stacks to dump
                } else {
                    j->life.time_out(*j, now);
                    results_[j->index()].time_limit_s = *opt_.timeout_s;
                    results_[j->index()].run_time_limit = true;
                }
            }
        }
    }
    bool job_timed_out = false;
    std::vector<JobProcess*> to_quarantine;
    for (auto& j : set_.jobs()) {
        switch (j->life.advance(*j, now, j->leader_alive(), j->empty())) {
        case JobLifecycle::Due::nothing: break;
        case JobLifecycle::Due::dump:
            if (j->is_check()) {
                j->life.dump_delivered();  // a check has no stacks to print: out of time, it is stopped
                stop(*j);
                break;
            }
            deliver_dump(*j);
            j->life.set_stopped_by_us(j->leader_alive());
            stop(*j);
            job_timed_out = job_timed_out || !will_retry(j->index());
            break;
        case JobLifecycle::Due::quarantine: to_quarantine.push_back(j.get()); break;
        }
    }
    for (auto* j : to_quarantine)
        quarantine(*j);
    if (job_timed_out && opt_.fail_fast && !run_timed_out_)
        stop_all("fail-fast");
}

int Run::poll_timeout_ms(Clock::time_point now) const
{
    std::optional<Clock::time_point> first;
    if (run_deadline_ && !run_timed_out_)
        first = *run_deadline_;
    for (const auto& j : set_.jobs())
        if (const auto t = j->life.next_deadline(j->leader_alive()); t && (!first || *t < *first))
            first = t;
    if (!first)
        return -1;
    if (*first <= now)
        return 0;
    // Round up so we never wake before the deadline and spin.
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*first - now).count();
    return static_cast<int>(std::min<long long>(ms, 24LL * 3600 * 1000));
}

// The processes that left their job's process group and were re-parented
// here (without cgroups; a cgroup keeps them in their job): stopped at the
// end, a second stop signal meanwhile ending the grace.
void Run::sweep_escapees()
{
    if (!escapees_)
        return;
    std::vector<pid_t> keep = helpers_.pids();
    for (const auto& j : abandoned_)
        keep.push_back(j->pid());
    auto pids = escapees_->find(keep);
    // What could not be stopped never left its group: it is the quarantined
    // job's, said so already.
    std::erase_if(pids, [this](pid_t pid) {
        return std::any_of(abandoned_.begin(), abandoned_.end(),
                           [pgid = getpgid(pid)](const auto& j) { return pgid == j->pid(); });
    });
    if (pids.empty())
        return;
    notice(escapee_notice(pids));
    const auto wait = [this](Clock::time_point deadline) {
        const auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
        auto what = set_.wait(static_cast<int>(std::max<long long>(ms, 0)));
        if (!what)
            return true;  // the poll itself failed: the SIGKILL that follows does not depend on it
        for (int sig : what->signals) {
            if (sig != SIGINT && sig != SIGTERM && sig != SIGHUP)
                continue;
            if (stopped_by_signal_ == 0)
                stopped_by_signal_ = sig;
            else
                force_kill_ = true;
        }
        return !force_kill_;
    };
    escapees_->stop(std::move(pids), keep, force_kill_, stop_times_.kill_grace, stop_times_.wait_after_kill, wait);
}

}  // namespace pto::runner
