// The policy: FIFO with head-of-line blocking, -j, fail-fast, stopping on
// signals, and the rule that a job's devices return to the pool only once
// nothing of its process group is left. The only place that blocks is the
// poll() in Run::loop, whose timeout is the next deadline.
#include <pto/scheduler.hpp>

#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fcntl.h>
#include <functional>
#include <memory>
#include <optional>

#include "devices/device_pool.hpp"
#include "runner/launcher.hpp"
#include "runner/process_group.hpp"
#include "runner/signal_channel.hpp"

namespace pto {

const char* to_string(JobStatus s)
{
    switch (s) {
    case JobStatus::passed: return "passed";
    case JobStatus::failed: return "failed";
    case JobStatus::timeout: return "timeout";
    case JobStatus::killed: return "killed";
    case JobStatus::cancelled: return "cancelled";
    }
    return "?";
}

namespace {

using Clock = std::chrono::steady_clock;

// After SIGKILL a group can still look alive: a zombie member whose parent
// left the group, or a process stuck in the kernel. Past this we hand the
// devices on with a warning rather than wait forever.
constexpr auto give_up_after_kill = std::chrono::seconds(2);

// Bytes read from one pipe per wake-up before looking at the others again.
// A chunk as large as a chatty job's widened pipe (see JobOutput) moves it
// in one splice or read: W3 (1 GiB) takes about 13% less CPU than with
// 64 KiB chunks.
constexpr std::size_t read_chunk = 1024 * 1024;
constexpr int reads_per_wake = 4;

double unix_now()
{
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double seconds(Clock::duration d)
{
    return std::chrono::duration<double>(d).count();
}

// Clamped to a century: a limit of 1e30 seconds means "never", not an
// overflow of the clock's nanoseconds.
Clock::duration to_duration(double s)
{
    constexpr double century = 100.0 * 365 * 24 * 3600;
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::clamp(s, 0.0, century)));
}

struct Running {
    std::size_t index = 0;
    pid_t pid = -1;
    UniqueFd out;
    std::vector<int> devices;
    Clock::time_point started;
    JobOutput output;
    bool leader_alive = true;
    bool stopped_by_us = false;
    int kill_stage = 0;  // 0: none, 1: SIGTERM sent, 2: SIGKILL sent, 3: given up
    Clock::time_point deadline;  // of the kill stage
    std::optional<Clock::time_point> limit_at;  // its own time limit
    bool timed_out = false;      // SIGUSR1 sent for its time limit or the run's
    bool dumped = false;         // on_timeout delivered
    Clock::time_point dump_at;   // when the dump grace ends
};

class Run {
public:
    Run(std::vector<Job>& jobs, const RunOptions& opt, runner::SignalChannel& signals,
        const runner::LaunchContext& ctx)
        : jobs_(jobs), opt_(opt), signals_(signals), ctx_(ctx), pool_(opt.pool), began_(Clock::now())
    {
        if (opt.timeout_s)
            run_deadline_ = began_ + to_duration(*opt.timeout_s);
        if (opt.stop_escapees)
            children_before_ = runner::children_of_this_process();
        results_.resize(jobs.size());
        for (std::size_t i = 0; i < jobs.size(); ++i) {
            results_[i].index = i;
            results_[i].label = jobs[i].label;
        }
    }

    Expected<void> loop();

    RunSummary take() { return RunSummary{std::move(results_), stopped_by_signal_, run_timed_out_}; }

    // The loop itself failed: leave nothing running behind us.
    void abandon()
    {
        for (auto& r : running_)
            runner::signal_group(r->pid, SIGKILL);
    }

private:
    void start_ready();
    bool start(std::size_t index, std::vector<int> devices);
    void notice(const std::string& text);
    void sweep_escapees();
    void reap_until(Clock::time_point deadline);
    std::vector<pid_t> escapees() const;
    Expected<void> handle_signals();
    void reap();
    void leader_exited(Running& r, int status);
    void read_output(Running& r, bool until_empty);
    void stop_all(const char* reason);
    void begin_kill(Running& r);
    void check_deadlines(Clock::time_point now);
    void begin_timeout(Running& r, Clock::time_point now);
    void deliver_dump(Running& r);
    void report_status();
    void finish_ended();
    void finish(Running& r);
    void cancel_rest();
    int poll_timeout_ms(Clock::time_point now) const;

    std::vector<Job>& jobs_;
    const RunOptions& opt_;
    runner::SignalChannel& signals_;
    const runner::LaunchContext& ctx_;
    DevicePool pool_;
    std::vector<JobResult> results_;
    std::vector<std::unique_ptr<Running>> running_;
    std::size_t next_ = 0;  // head of the FIFO queue
    Clock::time_point began_;
    std::optional<Clock::time_point> run_deadline_;
    bool run_timed_out_ = false;
    bool stopping_ = false;
    bool force_kill_ = false;
    int stopped_by_signal_ = 0;
    std::size_t finished_ = 0;
    std::vector<pid_t> children_before_;  // the caller's own, never ours to stop
    bool fd_throttled_ = false;
    bool fd_notice_given_ = false;
    std::vector<pollfd> pollfds_;
    std::vector<Running*> polled_;
    std::vector<PollClient*> clients_;
};

void Run::start_ready()
{
    while (!stopping_ && next_ < jobs_.size()) {
        if (opt_.max_parallel != 0 && running_.size() >= opt_.max_parallel)
            return;
        if (fd_throttled_)
            return;  // until a running job ends and frees its descriptors
        auto devices = pool_.acquire(jobs_[next_].device_count);
        if (!devices)
            return;  // head-of-line: nothing behind it may pass
        if (!start(next_, std::move(*devices)))
            return;  // stays at the head
        ++next_;
    }
}

void Run::notice(const std::string& text)
{
    if (opt_.observer != nullptr)
        opt_.observer->on_notice(text);
}

// False when the job could not start for lack of file descriptors while
// others run: it stays at the head of the queue until one of them ends.
bool Run::start(std::size_t index, std::vector<int> devices)
{
    const Job& job = jobs_[index];
    JobResult& res = results_[index];
    const auto started = Clock::now();

    // The spill file's descriptor before the process: a job that could not
    // keep its output must wait, not run and lose it.
    auto output = JobOutput::reserve(opt_.spill_place, opt_.output_memory_limit);
    Expected<LaunchSpec> spec = !output ? tl::unexpected(output.error())
                                : job.build ? job.build(devices) : fail("job has no build function");
    auto child = spec ? runner::launch(*spec, ctx_) : Expected<runner::Child>(tl::unexpected(spec.error()));
    if (!child) {
        const int err = child.error().sys_errno;
        if ((err == EMFILE || err == ENFILE) && !running_.empty()) {
            pool_.release(devices);
            fd_throttled_ = true;
            if (!fd_notice_given_) {
                fd_notice_given_ = true;
                notice("out of file descriptors with " + std::to_string(running_.size()) +
                       " jobs running; each further job waits for one to end (raise 'ulimit -n' to run more at once)");
            }
            return false;
        }
        res.devices = devices;
        res.start = unix_now();
        res.status = JobStatus::failed;
        res.error = child.error().message;
        res.end = res.start;
        res.duration_s = seconds(Clock::now() - started);
        pool_.release(devices);
        ++finished_;
        if (opt_.observer != nullptr)
            opt_.observer->on_finish(job, res, JobOutput{});
        if (opt_.fail_fast)
            stop_all("fail-fast");
        return true;
    }
    res.devices = devices;
    res.start = unix_now();
    auto r = std::make_unique<Running>();
    r->output = std::move(*output);
    if (const auto limit = job.timeout_s ? job.timeout_s : opt_.job_timeout_s)
        r->limit_at = started + to_duration(*limit);
    r->index = index;
    r->pid = child->pid;
    r->out = std::move(child->output);
    r->devices = std::move(devices);
    r->started = started;
    res.pid = r->pid;
    running_.push_back(std::move(r));
    if (opt_.observer != nullptr)
        opt_.observer->on_start(job, res);
    return true;
}

void Run::stop_all(const char* reason)
{
    if (!stopping_) {
        stopping_ = true;
        if (opt_.observer != nullptr)
            opt_.observer->on_stopping(reason);
    }
    for (auto& r : running_) {
        if (r->leader_alive)
            r->stopped_by_us = true;
        begin_kill(*r);
    }
}

void Run::begin_kill(Running& r)
{
    if (force_kill_) {
        if (r.kill_stage < 2) {
            runner::signal_group(r.pid, SIGKILL);
            r.kill_stage = 2;
            r.deadline = Clock::now() + give_up_after_kill;
        }
        return;
    }
    if (r.kill_stage == 0) {
        runner::signal_group(r.pid, SIGTERM);
        r.kill_stage = 1;
        r.deadline = Clock::now() + to_duration(opt_.kill_grace_s);
    }
}

void Run::begin_timeout(Running& r, Clock::time_point now)
{
    r.timed_out = true;
    r.dump_at = now + to_duration(opt_.dump_grace_s);
    // Python's faulthandler.register(SIGUSR1) and similar print their stacks
    // on it; the pipe is read on through the dump grace to catch them.
    runner::signal_group(r.pid, SIGUSR1);
}

void Run::deliver_dump(Running& r)
{
    r.dumped = true;
    read_output(r, true);
    if (opt_.observer != nullptr)
        opt_.observer->on_timeout(jobs_[r.index], results_[r.index], r.output, seconds(Clock::now() - r.started));
}

void Run::check_deadlines(Clock::time_point now)
{
    if (run_deadline_ && !run_timed_out_ && now >= *run_deadline_) {
        run_timed_out_ = true;
        if (!stopping_) {
            stopping_ = true;
            if (opt_.observer != nullptr)
                opt_.observer->on_stopping("the run's time limit");
        }
        for (auto& r : running_)
            if (r->leader_alive && r->kill_stage == 0 && !r->timed_out)
                begin_timeout(*r, now);
    }
    bool job_timed_out = false;
    for (auto& r : running_) {
        if (r->limit_at && !r->timed_out && r->leader_alive && r->kill_stage == 0 && now >= *r->limit_at)
            begin_timeout(*r, now);
        if (r->timed_out && !r->dumped && now >= r->dump_at) {
            deliver_dump(*r);
            r->stopped_by_us = r->leader_alive;
            begin_kill(*r);
            job_timed_out = true;
        }
        if (r->kill_stage == 0 || r->kill_stage == 3 || now < r->deadline)
            continue;
        if (r->kill_stage == 1) {
            runner::signal_group(r->pid, SIGKILL);
            r->kill_stage = 2;
            r->deadline = now + give_up_after_kill;
        } else {
            // Give up on the group (see give_up_after_kill): once the leader
            // is reaped, finish_ended treats kill_stage 3 as gone.
            r->kill_stage = 3;
        }
    }
    if (job_timed_out && opt_.fail_fast && !run_timed_out_)
        stop_all("fail-fast");
}

int Run::poll_timeout_ms(Clock::time_point now) const
{
    std::optional<Clock::time_point> first;
    const auto consider = [&first](Clock::time_point t) {
        if (!first || t < *first)
            first = t;
    };
    if (run_deadline_ && !run_timed_out_)
        consider(*run_deadline_);
    for (const auto& r : running_) {
        if (r->kill_stage == 1 || r->kill_stage == 2)
            consider(r->deadline);
        if (r->timed_out && !r->dumped)
            consider(r->dump_at);
        else if (r->limit_at && !r->timed_out && r->leader_alive && r->kill_stage == 0)
            consider(*r->limit_at);
    }
    if (!first)
        return -1;
    if (*first <= now)
        return 0;
    // Round up so we never wake before the deadline and spin.
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*first - now).count();
    return static_cast<int>(std::min<long long>(ms, 24LL * 3600 * 1000));
}

Expected<void> Run::handle_signals()
{
    auto sigs = signals_.drain();
    if (!sigs)
        return tl::unexpected(sigs.error());
    bool child = false;
    for (int sig : *sigs) {
        if (sig == SIGCHLD) {
            child = true;
        } else if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
            if (stopped_by_signal_ != 0) {
                // A second stop signal: no more grace.
                force_kill_ = true;
            } else {
                stopped_by_signal_ = sig;
            }
            stop_all("interrupted");
        }
        if (sig == SIGUSR1)
            report_status();
    }
    if (child)
        reap();
    return {};
}

void Run::report_status()
{
    if (opt_.observer == nullptr)
        return;
    const auto now = Clock::now();
    StatusReport report;
    report.queued = stopping_ ? 0 : jobs_.size() - next_;
    report.finished = finished_;
    report.elapsed_s = seconds(now - began_);
    for (const auto& r : running_)
        report.running.push_back({&jobs_[r->index], &results_[r->index], seconds(now - r->started), &r->output});
    opt_.observer->on_status(report);
}

void Run::reap()
{
    for (;;) {
        int status = 0;
        const pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;  // 0: none left exited; ECHILD: no children at all
        for (auto& r : running_)
            if (r->pid == pid && r->leader_alive) {
                leader_exited(*r, status);
                break;
            }
        // Any other pid is a job's orphan handed to us as subreaper: reaping
        // it is all we owe it.
    }
}

void Run::leader_exited(Running& r, int status)
{
    r.leader_alive = false;
    JobResult& res = results_[r.index];
    if (WIFEXITED(status)) {
        res.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        res.signal = WTERMSIG(status);
    }
    if (r.timed_out)
        res.status = JobStatus::timeout;
    else if (r.stopped_by_us)
        res.status = JobStatus::killed;
    else if (res.exit_code == 0)
        res.status = JobStatus::passed;
    else
        res.status = JobStatus::failed;

    // A timed-out job's leftovers are stopped when its dump grace ends (a
    // shell leader dies of SIGUSR1 while the test under it prints stacks).
    const bool dumping = r.timed_out && !r.dumped;
    if (r.kill_stage == 0 && !dumping && runner::group_exists(r.pid)) {
        res.stragglers = runner::count_group_members(r.pid);
        begin_kill(r);
    }
    if (res.status == JobStatus::failed && opt_.fail_fast)
        stop_all("fail-fast");
}

void Run::read_output(Running& r, bool until_empty)
{
    std::function<void(std::string_view)> live;
    if (opt_.observer != nullptr && opt_.output_live)
        live = [this, &r](std::string_view bytes) { opt_.observer->on_output(jobs_[r.index], results_[r.index], bytes); };
    for (int i = 0; r.out && (until_empty || i < reads_per_wake); ++i) {
        const auto got = r.output.take_from_pipe(r.out.get(), read_chunk, live);
        if (got.eof)
            r.out.reset();
        else if (got.bytes == 0)
            return;
    }
}

void Run::finish_ended()
{
    for (std::size_t i = 0; i < running_.size();) {
        Running& r = *running_[i];
        const bool gone = !r.leader_alive && (r.kill_stage == 3 || !runner::group_exists(r.pid));
        if (!gone) {
            ++i;
            continue;
        }
        // Whatever the group wrote before it ended is in the pipe; a process
        // that left the group may hold the pipe open, so stop at "empty".
        read_output(r, true);
        finish(r);
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
    }
}

void Run::finish(Running& r)
{
    JobResult& res = results_[r.index];
    // A job that died of its SIGUSR1 before the dump grace ended still gets
    // its TIMEOUT report, and still counts for fail-fast.
    if (r.timed_out && !r.dumped) {
        deliver_dump(r);
        if (opt_.fail_fast && !run_timed_out_)
            stop_all("fail-fast");
    }
    pool_.release(r.devices);
    fd_throttled_ = false;
    ++finished_;
    res.end = unix_now();
    res.duration_s = seconds(Clock::now() - r.started);
    if (r.kill_stage == 3)
        res.error = "some processes of its group could not be stopped";
    if (r.output.error()) {
        res.output_lost = r.output.dropped();
        res.error = r.output.error()->message + " (" + std::to_string(r.output.dropped()) + " bytes of output lost)";
    }
    if (opt_.keep_output) {
        auto all = r.output.str();
        if (all)
            res.output = std::move(*all);
        else
            res.error = all.error().message;
    }
    if (opt_.observer != nullptr)
        opt_.observer->on_finish(jobs_[r.index], res, r.output);
}

void Run::cancel_rest()
{
    for (; next_ < jobs_.size(); ++next_)
        if (opt_.observer != nullptr)
            opt_.observer->on_cancel(jobs_[next_], results_[next_]);
}

Expected<void> Run::loop()
{
    for (;;) {
        start_ready();
        if (running_.empty() && (stopping_ || next_ >= jobs_.size()))
            break;

        pollfds_.clear();
        polled_.clear();
        pollfds_.push_back({signals_.fd(), POLLIN, 0});
        for (auto& r : running_)
            if (r->out) {
                pollfds_.push_back({r->out.get(), POLLIN, 0});
                polled_.push_back(r.get());
            }
        clients_.clear();
        for (PollClient* c : opt_.poll_clients)
            if (c->poll_fd() >= 0) {
                pollfds_.push_back({c->poll_fd(), c->poll_events(), 0});
                clients_.push_back(c);
            }
        const int n = poll(pollfds_.data(), pollfds_.size(), poll_timeout_ms(Clock::now()));
        if (n < 0 && errno != EINTR)
            return tl::unexpected(sys_error("poll", errno));

        // Signals first: output must never starve Ctrl-C or the reaping.
        if (n > 0 && pollfds_[0].revents != 0)
            if (auto ok = handle_signals(); !ok)
                return ok;
        for (std::size_t i = 1; n > 0 && i <= polled_.size(); ++i)
            if (pollfds_[i].revents != 0)
                read_output(*polled_[i - 1], false);
        for (std::size_t i = 0; n > 0 && i < clients_.size(); ++i)
            if (const short revents = pollfds_[1 + polled_.size() + i].revents; revents != 0)
                clients_[i]->on_ready(revents);
        check_deadlines(Clock::now());
        finish_ended();
    }
    cancel_rest();
    sweep_escapees();
    return {};
}

std::vector<pid_t> Run::escapees() const
{
    auto pids = runner::children_of_this_process();
    std::erase_if(pids, [this](pid_t pid) {
        return std::find(children_before_.begin(), children_before_.end(), pid) != children_before_.end();
    });
    return pids;
}

// Waits for children to exit until `deadline`, reaping whatever exits.
void Run::reap_until(Clock::time_point deadline)
{
    for (;;) {
        if (escapees().empty())
            return;
        const auto now = Clock::now();
        if (now >= deadline)
            return;
        pollfd pfd{signals_.fd(), POLLIN, 0};
        const auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
        if (poll(&pfd, 1, static_cast<int>(ms)) > 0) {
            // A read error here only means we look at /proc again sooner.
            (void)signals_.drain();
            while (waitpid(-1, nullptr, WNOHANG) > 0) {
            }
        }
    }
}

// A process that left its job's process group (setsid, setpgid) escapes the
// group's SIGTERM/SIGKILL; once its parent is gone it is re-parented to us
// as subreaper. Nothing of a run may outlive it, so stop those now.
void Run::sweep_escapees()
{
    if (!opt_.stop_escapees)
        return;
    auto pids = escapees();
    if (pids.empty())
        return;
    std::string list;
    for (pid_t pid : pids)
        list += (list.empty() ? "" : " ") + std::to_string(pid);
    notice("stopping " + std::to_string(pids.size()) + " process" + (pids.size() == 1 ? "" : "es") +
           " that left their job's process group: pid " + list);
    const auto signal_all = [](const std::vector<pid_t>& targets, int sig) {
        for (pid_t pid : targets) {
            // An escapee that made its own group takes its group with it.
            if (getpgid(pid) == pid)
                runner::signal_group(pid, sig);
            else
                (void)kill(pid, sig);  // ESRCH: already gone
        }
    };
    signal_all(pids, force_kill_ ? SIGKILL : SIGTERM);
    reap_until(Clock::now() + to_duration(force_kill_ ? 0 : opt_.kill_grace_s));
    pids = escapees();
    if (pids.empty())
        return;
    signal_all(pids, SIGKILL);
    reap_until(Clock::now() + give_up_after_kill);
}

// While the run lasts, orphans of the jobs are re-parented to this process,
// so their exits wake the loop and group_exists() settles without polling.
class SubreaperScope {
public:
    SubreaperScope()
    {
        int was = 0;
        if (prctl(PR_GET_CHILD_SUBREAPER, &was) == 0 && was == 0)
            set_ = prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
    }
    ~SubreaperScope()
    {
        if (set_)
            (void)prctl(PR_SET_CHILD_SUBREAPER, 0);  // cannot fail once set
    }
    SubreaperScope(const SubreaperScope&) = delete;
    SubreaperScope& operator=(const SubreaperScope&) = delete;

private:
    bool set_ = false;
};

}  // namespace

Expected<RunSummary> run_jobs(std::vector<Job> jobs, const RunOptions& options)
{
    DevicePool pool(options.pool);
    for (const Job& job : jobs)
        if (job.device_count > pool.size())
            return fail("job '" + job.label + "' needs " + std::to_string(job.device_count) +
                        " devices but the pool has " + std::to_string(pool.size()));

    auto signals = runner::SignalChannel::open(options.handle_signals);
    if (!signals)
        return tl::unexpected(signals.error());
    UniqueFd dev_null(open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!dev_null)
        return tl::unexpected(sys_error("open /dev/null", errno));
    SubreaperScope subreaper;
    const runner::Environment env;
    const runner::LaunchContext ctx{&env, dev_null.get(), &signals->caller_mask()};

    Run run(jobs, options, *signals, ctx);
    if (auto ok = run.loop(); !ok) {
        run.abandon();
        return tl::unexpected(ok.error());
    }
    return run.take();
}

}  // namespace pto
