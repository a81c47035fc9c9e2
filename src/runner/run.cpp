#include "runner/run.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <functional>

#include "runner/clock.hpp"
#include "runner/guardian.hpp"

namespace pto::runner {
namespace {

// After SIGKILL, how long a job may take to be gone. Past it, what is left
// cannot be stopped (a setuid process we may not signal, a process stuck in
// a driver): the job's devices are withheld for the rest of the run.
constexpr auto wait_after_kill = std::chrono::seconds(2);

// Bytes read from one pipe per wake-up before looking at the others again.
// A chunk as large as a chatty job's widened pipe (see JobOutput) moves it
// in one splice or read: W3 (1 GiB) takes about 13% less CPU than with
// 64 KiB chunks.
constexpr std::size_t read_chunk = 1024 * 1024;
constexpr int reads_per_wake = 4;

std::vector<PollClient*> with(std::vector<PollClient*> clients, PollClient* more)
{
    if (more != nullptr)
        clients.push_back(more);
    return clients;
}

}  // namespace

Run::Run(std::vector<Job>& jobs, const RunOptions& opt, SignalChannel& signals, const LaunchContext& ctx,
         RunCgroup* cgroup, Helpers& helpers, placement::Placement& placement, leases::LockDir* locks)
    : jobs_(jobs), opt_(opt), ctx_(ctx), cgroup_(cgroup),
      stop_times_{to_duration(opt.kill_grace_s), to_duration(opt.dump_grace_s), wait_after_kill},
      // A check out of time is stopped at once: it has no stacks to print.
      check_times_{to_duration(opt.kill_grace_s), Clock::duration::zero(), wait_after_kill},
      set_(signals, with(with(opt.poll_clients, locks), ctx.guardian)), helpers_(helpers), placement_(placement),
      queue_(jobs.size()), results_(jobs.size()), grants_(jobs.size()),
      sick_retried_(jobs.size(), false), began_(Clock::now())
{
    set_.set_helpers(&helpers);
    // Woken by a lease given back in the one poll: the loop then tries the
    // waiting jobs again (start_ready), with what was set aside.
    if (locks != nullptr)
        locks->on_freed([this] { placement_.bring_back(); });
    if (ctx.guardian != nullptr)
        ctx.guardian->on_lost([this](const std::string& text) { notice(text); });
    if (opt.slurm)
        step_control_ = {opt.slurm->scancel, &helpers, [this](const std::string& text) { notice(text); }};
    if (opt.timeout_s)
        run_deadline_ = began_ + to_duration(*opt.timeout_s);
    if (opt.stop_escapees && cgroup == nullptr)
        escapees_.emplace();
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        results_[i].index = i;
        results_[i].label = jobs[i].label;
        if (jobs[i].device_count == 0 && jobs[i].slots == 0 && jobs[i].port_count == 0)
            unplaced_.push_back(i);
    }
}

RunSummary Run::take()
{
    RunSummary s{std::move(results_), stopped_by_signal_, run_timed_out_, {}, std::move(withheld_),
                 std::move(sick_), std::move(sick_on_nodes_)};
    s.containment = cgroup_ != nullptr ? Containment::cgroup : Containment::process_group;
    return s;
}

void Run::notice(const std::string& text)
{
    if (opt_.observer != nullptr)
        opt_.observer->on_notice(text);
}

bool Run::will_retry(std::size_t index) const
{
    const std::size_t own = results_[index].attempts.size() - (sick_retried_[index] ? 1 : 0);
    return !stopping_ && own < jobs_[index].retries;
}

// Keeps the try that failed in `attempts`, tells the observers, and puts
// the job back at the head of the queue with nothing held.
void Run::retry(std::size_t index, const JobOutput& output, std::vector<int> sick)
{
    JobResult& res = results_[index];
    res.attempts.push_back(Attempt{res.status, res.exit_code, res.signal, res.devices, res.start, res.end,
                                   res.duration_s, std::move(sick), res.node});
    if (opt_.observer != nullptr)
        opt_.observer->on_retry(jobs_[index], res, output);
    res.exit_code.reset();
    res.signal = 0;
    res.time_limit_s = 0;
    res.run_time_limit = false;
    res.devices.clear();
    res.ports.clear();
    res.node.clear();
    res.pid = -1;
    res.stragglers = 0;
    res.error.clear();
    res.status = JobStatus::cancelled;
    queue_.push_retry(index);
}

void Run::on_signal(int sig)
{
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
        if (stopped_by_signal_ != 0)
            force_kill_ = true;  // a second stop signal: no more grace
        else
            stopped_by_signal_ = sig;
        stop_all("interrupted");
    } else if (sig == SIGUSR1) {
        report_status();
    } else if (opt_.observer != nullptr &&
               std::find(opt_.watched_signals.begin(), opt_.watched_signals.end(), sig) != opt_.watched_signals.end()) {
        opt_.observer->on_signal(sig);
    }
}

void Run::report_status()
{
    if (opt_.observer == nullptr)
        return;
    const auto now = Clock::now();
    StatusReport report;
    report.queued = stopping_ ? 0 : queue_.waiting();
    report.finished = finished_;
    report.elapsed_s = seconds(now - began_);
    if (const auto head = queue_.front(); head && head == waiting_job_ && placement_.waiting())
        report.waiting = jobs_[*head].label + " waits for " + waiting_for_;
    for (const auto& j : set_.jobs())
        if (j->is_check())
            report.checks.push_back({j->checked_device, j->pid(), seconds(now - j->started()), !j->leader_alive()});
    for (const auto& j : set_.jobs())
        if (!j->is_check() && !j->holding) {
            j->output().settle();
            report.running.push_back(
                {&jobs_[j->index()], &results_[j->index()], seconds(now - j->started()), &j->output()});
        }
    opt_.observer->on_status(report);
}

void Run::on_leader_exit(JobProcess& j)
{
    // srun has written all it will: the agent's end frame, which says how
    // the line ended, is in the pipe now.
    if (j.step() != nullptr)
        read(j, 0);
    j.exit_handled = true;
    if (j.is_check()) {
        // Its verdict is taken when nothing of it is left; what its shell
        // left behind (holding the check's pipe, it kept the run waiting
        // for ever) is stopped now, as a job's leftovers are.
        if (j.life.stage() == StopStage::none && !j.empty()) {
            const int left = j.member_count();
            notice("the check of device " + std::to_string(j.checked_device) + " left " +
                   (left < 0 ? std::string("processes") : std::to_string(left) + (left == 1 ? " process" : " processes")) +
                   " running after its shell exited; stopped " + (left == 1 ? "it" : "them"));
            stop(j);
        }
        return;
    }
    if (j.holding || (j.step() != nullptr && j.step()->holding()))
        return;  // no job's any more (run_step_health.cpp)
    JobResult& res = results_[j.index()];
    if (j.cancelled_pending) {
        res.status = JobStatus::cancelled;
        return;
    }
    if (j.step() != nullptr && !j.step()->header() && !j.step()->launch_failure().empty()) {
        if (placement_.lose(grants_[j.index()]))
            node_lost(grants_[j.index()], "its steps fail to launch (" + j.step()->launch_failure() + ")");
        j.relaunch = true;
        res.status = JobStatus::cancelled;
        return;
    }
    take_status(j, j.wait_status());
    res.stragglers = j.stopped_where_it_ran();

    // A timed-out job's leftovers are stopped when its dump grace ends (a
    // shell leader dies of SIGUSR1 while the test under it prints stacks).
    const bool dumping = j.life.timed_out() && !j.life.dumped();
    if (j.life.stage() == StopStage::none && !dumping && !j.empty()) {
        res.stragglers = j.member_count();
        stop(j);
    }
    if (res.status == JobStatus::failed && opt_.fail_fast && !will_retry(j.index()))
        stop_all("fail-fast");
}

// How the job's process ended (`wait_status`) makes its status.
void Run::take_status(JobProcess& j, int wait_status)
{
    JobResult& res = results_[j.index()];
    if (WIFEXITED(wait_status))
        res.exit_code = WEXITSTATUS(wait_status);
    else if (WIFSIGNALED(wait_status))
        res.signal = WTERMSIG(wait_status);
    if (j.life.timed_out())
        res.status = JobStatus::timeout;
    else if (j.life.stopped_by_us())
        res.status = JobStatus::killed;
    else if (res.exit_code == 0)
        res.status = JobStatus::passed;
    else
        res.status = JobStatus::failed;
}

void Run::read(JobProcess& j, int max_reads)
{
    // Without anyone to see the bytes as they come, the kernel moves them
    // from the pipe to the spill file (splice) and they never enter here;
    // a Slurm step's first line is pto-par's, and is looked at.
    std::function<void(std::string_view)> live;
    const bool watched = opt_.observer != nullptr && opt_.output_live && !j.is_check() && !j.holding &&
                         (!opt_.output_live_for || opt_.output_live_for(j.index()));
    // Two pointers each: small enough for std::function to keep without an
    // allocation on every read. A step's START comes before the first
    // output after its header.
    if (watched)
        live = [this, &j](std::string_view bytes) {
            note_step_start(j);
            opt_.observer->on_output_live(jobs_[j.index()], results_[j.index()], bytes, j.output());
        };
    else if (j.step() != nullptr && !j.holding)
        live = [this, &j](std::string_view) { note_step_start(j); };
    JobOutput::Passage passage;
    if (watched && opt_.output_passage && !opt_.keep_output && j.step() == nullptr)
        passage = opt_.output_passage(j.index());
    j.read_output(read_chunk, max_reads, live, passage);
    if (auto moved = j.output().take_notice())
        notice("job '" + jobs_[j.index()].label + "': " + *moved);
    if (j.holding)
        return;
    note_step_start(j);
    take_verdicts(j);
}

void Run::finish_ended()
{
    for (auto& j : set_.jobs())
        if (!j->holding && j->step() != nullptr && j->step()->holding())
            hold(*j);
    std::vector<JobProcess*> ended;
    for (auto& j : set_.jobs())
        if (!j->leader_alive() && j->empty())
            ended.push_back(j.get());
    for (auto* j : ended) {
        // Whatever the job wrote before it ended is in the pipe; a process
        // that left it may hold the pipe open, so stop at "empty".
        read(*j, 0);
        if (j->output().paused()) {
            // Its output waits for room (a full disk): the job is not over
            // until it is kept, unless the run must end now.
            if (stopped_by_signal_ == 0 && !run_timed_out_)
                continue;
            j->output().stop_pausing();
            read(*j, 0);
        }
        // Its group is empty: from here on its id may be another's.
        if (ctx_.guardian != nullptr)
            ctx_.guardian->job_ended(j->pid());
        auto done = set_.take(j);
        // Whatever left, a check too, gave back descriptors and processes a
        // start that was short of them may now get.
        throttled_ = false;
        if (done->holding)
            continue;  // its job's report went out when it began to hold
        if (cgroup_ != nullptr)
            if (auto cg = done->take_empty_cgroup())
                cgroup_->recycle(std::move(*cg));
        if (done->is_check()) {
            check_ended(*done, {});
            continue;
        }
        if (done->cancelled_pending || done->relaunch) {
            placement_.release(grants_[done->index()]);
            never_ran(*done);
            continue;
        }
        end_try(*done);
        if (wants_check(*done)) {
            park(std::move(done));
            continue;
        }
        placement_.release(grants_[done->index()]);
        report(*done, false);
        // `done` goes: it closes the pipe (and removes a cgroup not recycled).
    }
    if (!ended.empty())
        show_live();
}

// A job that an end left running alone may have become live (the live
// block, RunOptions::output_live_for): it is shown what it printed so far
// now, not at its next bytes, which may be long in coming.
void Run::show_live()
{
    if (opt_.observer == nullptr || !opt_.output_live || !opt_.output_live_for)
        return;
    for (const auto& j : set_.jobs())
        if (!j->is_check() && !j->holding && opt_.output_live_for(j->index()))
            opt_.observer->on_output_live(jobs_[j->index()], results_[j->index()], {}, j->output());
}

// A step that Slurm never started: queued again for another node, or
// cancelled.
void Run::never_ran(JobProcess& j)
{
    throttled_ = false;
    JobResult& res = results_[j.index()];
    res.devices.clear();
    res.node.clear();
    res.pid = -1;
    res.start = 0;
    if (j.relaunch && !stopping_) {
        queue_.push_retry(j.index());
        cancel_unfittable();
        return;
    }
    res.error = "the run stopped while it waited for Slurm to create its step";
    if (opt_.observer != nullptr)
        opt_.observer->on_cancel(jobs_[j.index()], res);
}

// The try is over: its TIMEOUT report if it is due, and its end.
void Run::end_try(JobProcess& j)
{
    JobResult& res = results_[j.index()];
    // A job that died of its SIGUSR1 before the dump grace ended still gets
    // its TIMEOUT report, and still counts for fail-fast.
    if (j.life.timed_out() && !j.life.dumped()) {
        deliver_dump(j);
        if (opt_.fail_fast && !run_timed_out_ && !will_retry(j.index()))
            stop_all("fail-fast");
    }
    // What ended a job pto-par stopped is what it sent last: a shell dies
    // of the SIGUSR1 that the test under it catches to print its stacks.
    if ((res.status == JobStatus::timeout || res.status == JobStatus::killed) && j.life.last_signal() != 0)
        res.signal = j.life.last_signal();
    ledger_.ended(j.index(), Clock::now());
    throttled_ = false;
    res.end = unix_now();
    res.duration_s = res.end - res.start;
    // Under Slurm a job that failed with no check after it (its agent was
    // stopped or killed), or ran out of time, leaves its GPUs in doubt.
    const bool failed = res.status == JobStatus::failed || res.status == JobStatus::timeout;
    if (j.step() != nullptr && failed && !j.step()->checked_after_line())
        distrust(res.node, res.devices);
}

// What it held is back (or withheld): the job runs again, or its verdict
// goes out.
void Run::report(JobProcess& j, bool abandoned)
{
    JobResult& res = results_[j.index()];
    j.output().settle();
    if ((res.status == JobStatus::failed || res.status == JobStatus::timeout) && !abandoned &&
        will_retry(j.index())) {
        retry(j.index(), j.output());
        return;
    }
    // A try that a sick device failed is not the job's own.
    if (res.status == JobStatus::passed && res.attempts.size() > (sick_retried_[j.index()] ? 1U : 0U))
        res.status = JobStatus::flaky;
    ++finished_;
    if (j.output().error()) {
        // Bytes shown as they came reached standard output: lost only to
        // what is kept of them.
        const auto lost = res.output_lost = j.output().dropped();
        const auto unkept = res.output_unkept = j.output().unkept_shown();
        std::string counts;
        if (lost != 0 || unkept == 0)
            counts = std::to_string(lost) + " bytes of output lost";
        if (unkept != 0)
            counts += (counts.empty() ? "" : "; ") + std::to_string(unkept) +
                      " bytes shown as they came but missing from its log and reports";
        res.error = j.output().error()->message + " (" + counts + ")";
    }
    if (opt_.keep_output) {
        auto all = j.output().str();
        if (all)
            res.output = std::move(*all);
        else
            res.error = all.error().message;
    }
    if (opt_.observer != nullptr)
        opt_.observer->on_finish(jobs_[j.index()], res, j.output());
}

std::size_t Run::running_jobs() const
{
    return static_cast<std::size_t>(
        std::count_if(set_.jobs().begin(), set_.jobs().end(),
                      [](const auto& j) { return !j->is_check() && !j->holding; }));
}

Expected<void> Run::loop()
{
    check_all_devices();
    for (;;) {
        start_ready();
        const bool idle = std::all_of(set_.jobs().begin(), set_.jobs().end(), [](const auto& j) { return j->holding; });
        if (idle && (stopping_ || queue_.empty())) {
            if (set_.empty())
                break;
            release_holders();
        }

        auto what = set_.wait(poll_timeout_ms(Clock::now()));
        if (!what)
            return tl::unexpected(what.error());
        // Signals first: output must never starve Ctrl-C or the reaping.
        for (int sig : what->signals)
            on_signal(sig);
        if (what->children)
            for (auto& j : set_.jobs())
                if (!j->leader_alive() && !j->exit_handled)
                    on_leader_exit(*j);
        for (auto* j : what->readable)
            read(*j, reads_per_wake);
        check_deadlines(Clock::now());
        finish_ended();
    }
    queue_.drain([this](std::size_t i) {
        if (opt_.observer != nullptr)
            opt_.observer->on_cancel(jobs_[i], results_[i]);
    });
    sweep_escapees();
    return {};
}

}  // namespace pto::runner
