// The policy: FIFO with head-of-line blocking, -j, fail-fast, time limits,
// stopping on signals, and the rule that a job's devices return to the pool
// only once nothing of it is left — or never, if something of it cannot be
// stopped. The processes themselves are JobProcess's; the one blocking call
// is ProcessSet::wait, whose timeout is the next deadline.
#include <pto/scheduler.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <optional>

#include <pto/devices.hpp>

#include "devices/device_pool.hpp"
#include "devices/port_pool.hpp"
#include "runner/cgroup.hpp"
#include "runner/launcher.hpp"
#include "runner/port_probe.hpp"
#include "runner/process_group.hpp"
#include "runner/process_set.hpp"
#include "runner/signal_channel.hpp"
#include "runner/slurm_step.hpp"

namespace pto {

const char* to_string(JobStatus s)
{
    switch (s) {
    case JobStatus::passed: return "passed";
    case JobStatus::failed: return "failed";
    case JobStatus::timeout: return "timeout";
    case JobStatus::killed: return "killed";
    case JobStatus::cancelled: return "cancelled";
    case JobStatus::flaky: return "flaky";
    }
    return "?";
}

namespace {

using runner::Clock;
using runner::JobProcess;
using runner::StopStage;

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

constexpr std::size_t no_node = static_cast<std::size_t>(-1);

// A node of a Slurm allocation as the scheduler counts it: Slurm picks which
// of its GPUs a step gets, so only how many are free matters here.
struct NodeSlots {
    std::string name;
    std::size_t free = 0;
    std::size_t usable = 0;  // less what quarantined steps keep
    bool failing = false;    // its steps fail to launch: out of the pool
};

bool is_shortage(int err)
{
    return err == EMFILE || err == ENFILE || err == EAGAIN || err == ENOMEM;
}

class Run {
public:
    Run(std::vector<Job>& jobs, const RunOptions& opt, runner::SignalChannel& signals,
        const runner::LaunchContext& ctx, runner::RunCgroup* cgroup, runner::Helpers& helpers)
        : jobs_(jobs), opt_(opt), ctx_(ctx), cgroup_(cgroup), set_(signals, opt.poll_clients), signals_(signals),
          pool_(opt.pool), ports_(opt.port_low, opt.port_high), helpers_(helpers), began_(Clock::now())
    {
        set_.set_helpers(&helpers);
        if (opt.slurm) {
            step_control_ = {opt.slurm->scancel, &helpers, [this](const std::string& text) { notice(text); }};
            for (const auto& n : opt.slurm->nodes)
                nodes_.push_back({n.name, n.devices, n.devices});
        }
        node_of_.resize(jobs.size(), no_node);
        if (opt.timeout_s)
            run_deadline_ = began_ + to_duration(*opt.timeout_s);
        if (opt.stop_escapees && cgroup == nullptr)
            children_before_ = runner::children_of_this_process();
        results_.resize(jobs.size());
        for (std::size_t i = 0; i < jobs.size(); ++i) {
            results_[i].index = i;
            results_[i].label = jobs[i].label;
        }
        left_queue_.resize(jobs.size(), false);
        held_.resize(jobs.size());
        held_ports_.resize(jobs.size());
    }

    Expected<void> loop();

    RunSummary take()
    {
        RunSummary s{std::move(results_), stopped_by_signal_, run_timed_out_, {}, std::move(withheld_)};
        s.containment = cgroup_ != nullptr ? Containment::cgroup : Containment::process_group;
        return s;
    }

private:
    void start_ready();
    std::optional<std::vector<int>> acquire_devices(std::size_t index);
    std::size_t pick_node(std::size_t count) const;
    void release_held(std::size_t index, const std::vector<int>& devices);
    std::size_t usable() const;
    void note_step_start(JobProcess& j);
    bool start(std::size_t index, std::vector<int> devices, std::vector<int> ports);
    void fail_to_start(std::size_t index, std::vector<int> devices, std::vector<int> ports, const Error& why);
    void notice(const std::string& text);
    void on_signal(int sig);
    void on_leader_exit(JobProcess& j);
    void read(JobProcess& j, int max_reads);
    void stop_all(const char* reason);
    void begin_stop(JobProcess& j);
    void check_deadlines(Clock::time_point now);
    void begin_timeout(JobProcess& j, Clock::time_point now);
    void deliver_dump(JobProcess& j);
    void quarantine(JobProcess& j);
    void cancel_unfittable();
    void backfill();
    void head_started(std::size_t index);
    void report_status();
    void finish_ended();
    void finish(JobProcess& j);
    void cancel_rest();
    bool will_retry(std::size_t index) const;
    void retry(std::size_t index, const JobOutput& output);
    int poll_timeout_ms(Clock::time_point now) const;
    void sweep_escapees();
    std::vector<pid_t> escapees() const;
    void wait_for_escapees(Clock::time_point deadline);

    std::vector<Job>& jobs_;
    const RunOptions& opt_;
    const runner::LaunchContext& ctx_;
    runner::RunCgroup* cgroup_;
    runner::ProcessSet set_;
    runner::SignalChannel& signals_;
    DevicePool pool_;
    PortPool ports_;
    runner::Helpers& helpers_;
    runner::StepControl step_control_{};
    std::vector<NodeSlots> nodes_;       // under Slurm; empty otherwise
    std::vector<std::size_t> node_of_;   // per job: its node's index while it runs, or no_node
    std::vector<JobResult> results_;
    std::vector<bool> left_queue_;  // cancelled or backfilled before its turn came
    struct Backfilled {
        std::size_t index;          // the job that went ahead
        std::size_t head;           // the job it went ahead of
        Clock::time_point promised;  // its history's end
        Clock::time_point shadow;    // when the head could start at the latest, as history said then
    };
    std::vector<Backfilled> backfilled_;
    std::vector<std::vector<int>> held_;  // per job: its devices while it runs
    std::vector<std::vector<int>> held_ports_;
    std::vector<std::unique_ptr<JobProcess>> abandoned_;  // could not be stopped
    std::vector<int> withheld_;
    std::size_t next_ = 0;  // head of the FIFO queue
    std::deque<std::size_t> again_;  // jobs to try again: ahead of the queue
    std::size_t launches_ = 0;
    Clock::time_point began_;
    std::optional<Clock::time_point> run_deadline_;
    bool run_timed_out_ = false;
    bool stopping_ = false;
    bool force_kill_ = false;
    int stopped_by_signal_ = 0;
    std::size_t finished_ = 0;
    std::vector<pid_t> children_before_;  // the caller's own, never ours to stop
    bool throttled_ = false;
    bool throttle_notice_given_ = false;
};

void Run::notice(const std::string& text)
{
    if (opt_.observer != nullptr)
        opt_.observer->on_notice(text);
}

void Run::start_ready()
{
    while (!stopping_ && !again_.empty()) {
        const std::size_t index = again_.front();
        if (opt_.max_parallel != 0 && set_.jobs().size() >= opt_.max_parallel)
            return;
        if (throttled_)
            return;
        auto devices = acquire_devices(index);
        if (!devices)
            return;
        auto ports = ports_.acquire(jobs_[index].port_count, runner::tcp_port_free);
        if (!ports) {
            release_held(index, *devices);
            return;
        }
        if (!start(index, std::move(*devices), std::move(*ports)))
            return;
        again_.pop_front();
    }
    while (!stopping_ && again_.empty() && next_ < jobs_.size()) {
        if (left_queue_[next_]) {
            ++next_;
            continue;
        }
        if (opt_.max_parallel != 0 && set_.jobs().size() >= opt_.max_parallel)
            return;
        if (throttled_)
            return;  // until a running job ends and frees what it held
        auto devices = acquire_devices(next_);
        if (!devices) {
            // Head-of-line: nothing behind it may pass, unless history says
            // it will be done before the head can start.
            if (opt_.backfill && !opt_.slurm)
                backfill();
            return;
        }
        auto ports = ports_.acquire(jobs_[next_].port_count, runner::tcp_port_free);
        if (!ports) {
            release_held(next_, *devices);
            if (!set_.empty())
                return;  // a running job's ports come back when it ends
            // Nothing of ours holds them: waiting could be for ever.
            fail_to_start(next_, std::move(*devices), {},
                          Error{"no " + std::to_string(jobs_[next_].port_count) + " consecutive free TCP ports in " +
                                std::to_string(opt_.port_low) + "-" + std::to_string(opt_.port_high) +
                                " (something else on this machine holds them)", 0});
            ++next_;
            continue;
        }
        if (!start(next_, std::move(*devices), std::move(*ports)))
            return;  // stays at the head
        head_started(next_);
        ++next_;
    }
}

// EASY backfill: the head waits for devices; the time it can start at the
// latest is when enough of the running jobs will have ended, by their
// history. A later job with history that fits in the free devices now and
// ends before that starts ahead of it; no job without history ever does.
void Run::backfill()
{
    const Job& head = jobs_[next_];
    const auto now = Clock::now();
    std::vector<std::pair<Clock::time_point, std::size_t>> ends;  // expected end, devices it frees
    for (const auto& j : set_.jobs()) {
        const auto& expected = jobs_[j->index()].expected_s;
        if (!expected)
            return;  // an end history cannot tell: nothing may pass
        ends.emplace_back(std::max(now, j->started() + to_duration(*expected)), held_[j->index()].size());
    }
    std::sort(ends.begin(), ends.end());
    std::size_t free = pool_.free_count();
    std::optional<Clock::time_point> shadow;
    for (const auto& [end, devices] : ends) {
        free += devices;
        if (free >= head.device_count) {
            shadow = end;
            break;
        }
    }
    if (!shadow)
        return;
    for (std::size_t i = next_ + 1; i < jobs_.size(); ++i) {
        if (opt_.max_parallel != 0 && set_.jobs().size() >= opt_.max_parallel)
            return;
        const Job& job = jobs_[i];
        if (left_queue_[i] || !job.expected_s || now + to_duration(*job.expected_s) > *shadow)
            continue;
        auto devices = pool_.acquire(job.device_count);
        if (!devices)
            continue;
        auto ports = ports_.acquire(job.port_count, runner::tcp_port_free);
        if (!ports) {
            pool_.release(*devices);
            continue;
        }
        if (!start(i, std::move(*devices), std::move(*ports)))
            return;
        left_queue_[i] = true;
        backfilled_.push_back({i, next_, now + to_duration(*job.expected_s), *shadow});
    }
}

// The head that backfilled jobs went ahead of starts: if one of them ran
// past its history and the head starts later than history promised, say so.
void Run::head_started(std::size_t index)
{
    const auto now = Clock::now();
    for (auto it = backfilled_.begin(); it != backfilled_.end();) {
        if (it->head != index) {
            ++it;
            continue;
        }
        const JobResult& r = results_[it->index];
        const auto ended = r.end > 0 ? it->promised + to_duration(r.duration_s - *jobs_[it->index].expected_s) : now;
        if (now > it->shadow && ended > it->promised) {
            char late[32];
            std::snprintf(late, sizeof late, "%.1f", seconds(now - it->shadow));
            notice("backfilled job '" + jobs_[it->index].label + "' ran past its history and delayed '" +
                   jobs_[index].label + "' by " + late + "s");
        }
        it = backfilled_.erase(it);
    }
}

// The devices for job `index` now: from the pool, or under Slurm a count on
// the node that has most free (Slurm picks the ids: the job learns them when
// its step runs). Nothing when they are not free.
std::optional<std::vector<int>> Run::acquire_devices(std::size_t index)
{
    const std::size_t count = jobs_[index].device_count;
    if (!opt_.slurm)
        return pool_.acquire(count);
    const std::size_t node = pick_node(count);
    if (node == no_node)
        return std::nullopt;
    nodes_[node].free -= count;
    node_of_[index] = node;
    return std::vector<int>{};
}

// The node with the most free GPUs among those that have `count` free (the
// first such in the allocation's order on a tie), so that steps spread over
// the nodes' CPUs; no_node if none has.
std::size_t Run::pick_node(std::size_t count) const
{
    std::size_t best = no_node;
    for (std::size_t i = 0; i < nodes_.size(); ++i)
        if (!nodes_[i].failing && nodes_[i].free >= count && (best == no_node || nodes_[i].free > nodes_[best].free))
            best = i;
    return best;
}

void Run::release_held(std::size_t index, const std::vector<int>& devices)
{
    if (node_of_[index] == no_node) {
        pool_.release(devices);
        return;
    }
    nodes_[node_of_[index]].free += jobs_[index].device_count;
    node_of_[index] = no_node;
}

// The most devices a job can still get.
std::size_t Run::usable() const
{
    if (!opt_.slurm)
        return pool_.usable();
    std::size_t most = 0;
    for (const auto& n : nodes_)
        if (!n.failing)
            most = std::max(most, n.usable);
    return most;
}

void Run::fail_to_start(std::size_t index, std::vector<int> devices, std::vector<int> ports, const Error& why)
{
    JobResult& res = results_[index];
    res.devices = devices;
    res.ports = ports;
    ports_.release(ports);
    res.start = unix_now();
    res.end = res.start;
    res.duration_s = 0;
    res.status = JobStatus::failed;
    res.error = why.message;
    release_held(index, devices);
    ++finished_;
    if (opt_.observer != nullptr)
        opt_.observer->on_finish(jobs_[index], res, JobOutput{});
    if (opt_.fail_fast)
        stop_all("fail-fast");
}

// False when the job could not start for lack of a resource (descriptors,
// processes, memory) while others run: it stays at the head of the queue
// until one of them ends and gives back what it held.
bool Run::start(std::size_t index, std::vector<int> devices, std::vector<int> ports)
{
    const Job& job = jobs_[index];
    const auto started = Clock::now();

    auto spec = job.build ? job.build(Allocation{devices, ports}) : fail("job has no build function");
    if (!spec) {
        fail_to_start(index, std::move(devices), std::move(ports), spec.error());
        return true;
    }
    // Everything the job needs is taken before it starts (its spill file's
    // descriptor, its cgroup, its pipe, its process): a shortage then makes
    // it wait, and never loses output it would have written.
    auto output = opt_.whole_output || opt_.keep_output
                      ? JobOutput::reserve(opt_.spill_place, opt_.output_memory_limit)
                      : Expected<JobOutput>(JobOutput::tail_only(opt_.output_memory_limit));
    std::optional<runner::JobCgroup> cgroup;
    Expected<runner::Child> child = fail("not started");
    if (!output) {
        child = tl::unexpected(output.error());
    } else if (cgroup_ != nullptr) {
        auto cg = cgroup_->make_job("job-" + std::to_string(++launches_));
        if (cg)
            cgroup = std::move(*cg);
        else
            child = tl::unexpected(cg.error());
    }
    const std::size_t node = node_of_[index];
    if (node != no_node)
        spec->argv = runner::step_argv(*opt_.slurm, nodes_[node].name, job.device_count, spec->argv);
    if (output && (cgroup_ == nullptr || cgroup))
        child = runner::launch(*spec, ctx_, cgroup ? cgroup->dir_fd() : -1, cgroup ? cgroup->procs_fd() : -1);
    if (cgroup)
        cgroup->close_start_fds();
    if (!child) {
        if (is_shortage(child.error().sys_errno) && !set_.empty()) {
            release_held(index, devices);
            ports_.release(ports);
            throttled_ = true;
            if (!throttle_notice_given_) {
                throttle_notice_given_ = true;
                const int err = child.error().sys_errno;
                const char* what = err == EMFILE || err == ENFILE ? "out of file descriptors"
                                   : err == EAGAIN              ? "out of processes"
                                                                : "out of memory";
                const char* raise = err == EMFILE || err == ENFILE ? " (raise 'ulimit -n' to run more at once)"
                                    : err == EAGAIN                ? " (raise 'ulimit -u' to run more at once)"
                                                                   : "";
                notice(std::string(what) + " with " + std::to_string(set_.jobs().size()) +
                       " jobs running (" + child.error().message + "); each further job waits for one to end" + raise);
            }
            return false;
        }
        fail_to_start(index, std::move(devices), std::move(ports), child.error());
        return true;
    }
    JobResult& res = results_[index];
    res.devices = devices;
    res.ports = ports;
    res.start = unix_now();
    res.pid = child->pid;
    auto j = std::make_unique<JobProcess>(index, child->pid, std::move(child->output), std::move(cgroup),
                                          std::move(*output), started);
    held_[index] = std::move(devices);
    held_ports_[index] = std::move(ports);
    if (node != no_node) {
        // It starts when its task runs: until then it waits for Slurm.
        res.node = nodes_[node].name;
        j->set_step(runner::StepState(nodes_[node].name, step_control_));
        set_.add(std::move(j));
        return true;
    }
    if (const auto limit = job.timeout_s ? job.timeout_s : opt_.job_timeout_s)
        j->limit_at = started + to_duration(*limit);
    j->start_reported = true;
    set_.add(std::move(j));
    if (opt_.observer != nullptr)
        opt_.observer->on_start(job, res);
    return true;
}

// A step's task has said where it runs and which GPUs it got: from here on
// it is running, and its time limit counts.
void Run::note_step_start(JobProcess& j)
{
    if (j.start_reported || j.step() == nullptr || !j.step()->header() || j.cancelled_pending)
        return;
    j.start_reported = true;
    const auto now = Clock::now();
    const Job& job = jobs_[j.index()];
    JobResult& res = results_[j.index()];
    res.devices = j.step()->header()->gpus;
    res.node = j.step()->header()->node;
    res.start = unix_now();
    j.mark_started(now);
    if (const auto limit = job.timeout_s ? job.timeout_s : opt_.job_timeout_s)
        j.limit_at = now + to_duration(*limit);
    if (opt_.observer != nullptr)
        opt_.observer->on_start(job, res);
}

void Run::stop_all(const char* reason)
{
    if (!stopping_) {
        stopping_ = true;
        if (opt_.observer != nullptr)
            opt_.observer->on_stopping(reason);
    }
    for (auto& j : set_.jobs()) {
        if (j->leader_alive())
            j->stopped_by_us = true;
        begin_stop(*j);
    }
}

void Run::begin_stop(JobProcess& j)
{
    const auto now = Clock::now();
    // A step Slurm has not created yet never ran: srun is killed (its helper
    // cancels the pending step) and the job is cancelled, at once. Its
    // header may be in the pipe already, unread: looked at first.
    if (j.step() != nullptr && !j.start_reported)
        read(j, 0);
    if (j.step() != nullptr && !j.start_reported) {
        if (j.stage == StopStage::none || j.stage == StopStage::terminating) {
            j.cancelled_pending = true;
            j.kill_all();
            j.stage = StopStage::killing;
            j.stage_deadline = now + wait_after_kill;
        }
        return;
    }
    if (force_kill_) {
        if (j.stage == StopStage::none || j.stage == StopStage::terminating) {
            j.kill_all();
            j.stage = StopStage::killing;
            j.stage_deadline = now + wait_after_kill;
        }
        return;
    }
    if (j.stage == StopStage::none) {
        j.signal(SIGTERM);
        // A stopped process would sit on SIGTERM until the SIGKILL.
        j.signal(SIGCONT);
        j.stage = StopStage::terminating;
        j.stage_deadline = now + to_duration(opt_.kill_grace_s);
    }
}

void Run::begin_timeout(JobProcess& j, Clock::time_point now)
{
    if (j.step() != nullptr && !j.start_reported) {
        begin_stop(j);
        return;
    }
    j.timed_out = true;
    j.dump_at = now + to_duration(opt_.dump_grace_s);
    // Python's faulthandler.register(SIGUSR1) and similar print their stacks
    // on it; the pipe is read on through the dump grace to catch them.
    j.signal(SIGUSR1);
}

void Run::deliver_dump(JobProcess& j)
{
    j.dumped = true;
    read(j, 0);
    if (opt_.observer != nullptr)
        opt_.observer->on_timeout(jobs_[j.index()], results_[j.index()], j.output(), seconds(Clock::now() - j.started()));
}

// Something of `j` survived SIGKILL: finish its report, keep its devices out
// of the pool for good, and cancel what can no longer fit.
void Run::quarantine(JobProcess& j)
{
    j.stage = StopStage::abandoned;
    JobResult& res = results_[j.index()];
    const auto& devices = j.step() != nullptr ? results_[j.index()].devices : held_[j.index()];
    const std::string what = runner::describe_processes(j.members());
    if (!j.exit_handled)
        res.status = j.timed_out ? JobStatus::timeout : JobStatus::killed;
    res.error = "could not be stopped (" + (what.empty() ? std::string("its processes") : what) + "); devices " +
                (devices.empty() ? std::string("none") : format_device_range(devices)) +
                " withheld for the rest of the run";
    notice("job '" + jobs_[j.index()].label + "' " + res.error);
    if (node_of_[j.index()] != no_node)
        nodes_[node_of_[j.index()]].usable -= jobs_[j.index()].device_count;
    else
        pool_.withhold(devices);
    ports_.withhold(held_ports_[j.index()]);
    withheld_.insert(withheld_.end(), devices.begin(), devices.end());
    std::sort(withheld_.begin(), withheld_.end());
    read(j, 0);
    finish(j);
    abandoned_.push_back(set_.take(&j));
    cancel_unfittable();
}

// Jobs waiting for more devices than the pool can still give would wait for
// ever: they are cancelled, saying why.
void Run::cancel_unfittable()
{
    for (auto it = again_.begin(); it != again_.end();) {
        const std::size_t i = *it;
        if (jobs_[i].device_count <= usable() && jobs_[i].port_count <= ports_.usable()) {
            ++it;
            continue;
        }
        results_[i].error = "cannot run again: needs " + std::to_string(jobs_[i].device_count) +
                            " devices but only " + std::to_string(usable()) + " remain usable";
        if (opt_.observer != nullptr)
            opt_.observer->on_cancel(jobs_[i], results_[i]);
        it = again_.erase(it);
    }
    for (std::size_t i = next_; i < jobs_.size(); ++i) {
        if (left_queue_[i] || (jobs_[i].device_count <= usable() && jobs_[i].port_count <= ports_.usable()))
            continue;
        left_queue_[i] = true;
        results_[i].error = "needs " + std::to_string(jobs_[i].device_count) + " devices but only " +
                            std::to_string(usable()) + " remain usable" + (opt_.slurm ? " on one node" : "") +
                            " (devices " +
                            format_device_range(withheld_) + " withheld)";
        if (opt_.observer != nullptr)
            opt_.observer->on_cancel(jobs_[i], results_[i]);
    }
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
        for (auto& j : set_.jobs())
            if (j->leader_alive() && j->stage == StopStage::none && !j->timed_out)
                begin_timeout(*j, now);
    }
    bool job_timed_out = false;
    std::vector<JobProcess*> to_quarantine;
    for (auto& j : set_.jobs()) {
        if (j->limit_at && !j->timed_out && j->leader_alive() && j->stage == StopStage::none && now >= *j->limit_at)
            begin_timeout(*j, now);
        if (j->timed_out && !j->dumped && now >= j->dump_at) {
            deliver_dump(*j);
            j->stopped_by_us = j->leader_alive();
            begin_stop(*j);
            job_timed_out = job_timed_out || !will_retry(j->index());
        }
        if (now < j->stage_deadline)
            continue;
        if (j->stage == StopStage::terminating) {
            j->kill_all();
            j->stage = StopStage::killing;
            j->stage_deadline = now + wait_after_kill;
        } else if (j->stage == StopStage::killing && !j->empty()) {
            to_quarantine.push_back(j.get());
        }
    }
    for (auto* j : to_quarantine)
        quarantine(*j);
    if (job_timed_out && opt_.fail_fast && !run_timed_out_)
        stop_all("fail-fast");
}

bool Run::will_retry(std::size_t index) const
{
    return !stopping_ && results_[index].attempts.size() < jobs_[index].retries;
}

// Keeps the try that failed in `attempts`, tells the observers, and puts
// the job back at the head of the queue with nothing held.
void Run::retry(std::size_t index, const JobOutput& output)
{
    JobResult& res = results_[index];
    res.attempts.push_back(Attempt{res.status, res.exit_code, res.signal, res.devices, res.start, res.end,
                                   res.duration_s});
    if (opt_.observer != nullptr)
        opt_.observer->on_retry(jobs_[index], res, output);
    res.exit_code.reset();
    res.signal = 0;
    res.devices.clear();
    res.ports.clear();
    res.pid = -1;
    res.stragglers = 0;
    res.error.clear();
    res.status = JobStatus::cancelled;
    again_.push_back(index);
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
    for (const auto& j : set_.jobs()) {
        if (j->stage == StopStage::terminating || j->stage == StopStage::killing)
            consider(j->stage_deadline);
        if (j->timed_out && !j->dumped)
            consider(j->dump_at);
        else if (j->limit_at && !j->timed_out && j->leader_alive() && j->stage == StopStage::none)
            consider(*j->limit_at);
    }
    if (!first)
        return -1;
    if (*first <= now)
        return 0;
    // Round up so we never wake before the deadline and spin.
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*first - now).count();
    return static_cast<int>(std::min<long long>(ms, 24LL * 3600 * 1000));
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
    for (std::size_t i = next_; i < jobs_.size() && !stopping_; ++i)
        report.queued += left_queue_[i] ? 0 : 1;
    report.finished = finished_;
    report.elapsed_s = seconds(now - began_);
    for (const auto& j : set_.jobs())
        report.running.push_back(
            {&jobs_[j->index()], &results_[j->index()], seconds(now - j->started()), &j->output()});
    opt_.observer->on_status(report);
}

void Run::on_leader_exit(JobProcess& j)
{
    // srun has written all it will: the agent's end frame, which says how
    // the line ended, is in the pipe now.
    if (j.step() != nullptr)
        read(j, 0);
    j.exit_handled = true;
    JobResult& res = results_[j.index()];
    if (j.cancelled_pending) {
        res.status = JobStatus::cancelled;
        return;
    }
    if (j.step() != nullptr && !j.step()->header() && !j.step()->launch_failure().empty()) {
        auto& node = nodes_[node_of_[j.index()]];
        if (!node.failing)
            notice("node " + node.name + " taken out of the pool for the rest of the run: its steps fail to launch (" +
                   j.step()->launch_failure() + "); its jobs are tried on the other nodes");
        node.failing = true;
        j.relaunch = true;
        res.status = JobStatus::cancelled;
        return;
    }
    const int status = j.wait_status();
    if (WIFEXITED(status))
        res.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        res.signal = WTERMSIG(status);
    if (j.timed_out)
        res.status = JobStatus::timeout;
    else if (j.stopped_by_us)
        res.status = JobStatus::killed;
    else if (res.exit_code == 0)
        res.status = JobStatus::passed;
    else
        res.status = JobStatus::failed;

    // A timed-out job's leftovers are stopped when its dump grace ends (a
    // shell leader dies of SIGUSR1 while the test under it prints stacks).
    const bool dumping = j.timed_out && !j.dumped;
    if (j.stage == StopStage::none && !dumping && !j.empty()) {
        res.stragglers = j.member_count();
        begin_stop(j);
    }
    if (res.status == JobStatus::failed && opt_.fail_fast && !will_retry(j.index()))
        stop_all("fail-fast");
}

void Run::read(JobProcess& j, int max_reads)
{
    // Without anyone to see the bytes as they come, the kernel moves them
    // from the pipe to the spill file (splice) and they never enter here;
    // a Slurm step's first line is pto-par's, and is looked at.
    std::function<void(std::string_view)> live;
    if ((opt_.observer != nullptr && opt_.output_live) || j.step() != nullptr)
        // Two pointers: small enough for std::function to keep without an
        // allocation on every read.
        live = [this, &j](std::string_view bytes) {
            // A step's START comes before the first output after its header.
            note_step_start(j);
            if (opt_.observer != nullptr && opt_.output_live)
                opt_.observer->on_output(jobs_[j.index()], results_[j.index()], bytes);
        };
    j.read_output(read_chunk, max_reads, live);
    note_step_start(j);
}

void Run::finish_ended()
{
    std::vector<JobProcess*> ended;
    for (auto& j : set_.jobs())
        if (!j->leader_alive() && j->empty())
            ended.push_back(j.get());
    for (auto* j : ended) {
        // Whatever the job wrote before it ended is in the pipe; a process
        // that left it may hold the pipe open, so stop at "empty".
        read(*j, 0);
        finish(*j);
        auto done = set_.take(j);
        if (cgroup_ != nullptr)
            if (auto cg = done->take_empty_cgroup())
                cgroup_->recycle(std::move(*cg));
        done.reset();  // closes the pipe (and removes a cgroup not recycled)
    }
}

void Run::finish(JobProcess& j)
{
    JobResult& res = results_[j.index()];
    // A job that died of its SIGUSR1 before the dump grace ended still gets
    // its TIMEOUT report, and still counts for fail-fast.
    if (j.timed_out && !j.dumped) {
        deliver_dump(j);
        if (opt_.fail_fast && !run_timed_out_ && !will_retry(j.index()))
            stop_all("fail-fast");
    }
    if (j.stage != StopStage::abandoned) {
        release_held(j.index(), held_[j.index()]);
        ports_.release(held_ports_[j.index()]);
    }
    throttled_ = false;
    if (j.cancelled_pending || j.relaunch) {
        // It never ran: queued again for another node, or cancelled.
        res.devices.clear();
        res.node.clear();
        res.pid = -1;
        res.start = 0;
        if (j.relaunch && !stopping_) {
            again_.push_back(j.index());
            cancel_unfittable();
            return;
        }
        res.error = "the run stopped while it waited for Slurm to create its step";
        if (opt_.observer != nullptr)
            opt_.observer->on_cancel(jobs_[j.index()], res);
        return;
    }
    res.end = unix_now();
    res.duration_s = res.end - res.start;
    if ((res.status == JobStatus::failed || res.status == JobStatus::timeout) && j.stage != StopStage::abandoned &&
        will_retry(j.index())) {
        retry(j.index(), j.output());
        return;
    }
    if (res.status == JobStatus::passed && !res.attempts.empty())
        res.status = JobStatus::flaky;
    ++finished_;
    if (j.output().error()) {
        res.output_lost = j.output().dropped();
        res.error = j.output().error()->message + " (" + std::to_string(j.output().dropped()) + " bytes of output lost)";
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

void Run::cancel_rest()
{
    for (; !again_.empty(); again_.pop_front())
        if (opt_.observer != nullptr)
            opt_.observer->on_cancel(jobs_[again_.front()], results_[again_.front()]);
    for (; next_ < jobs_.size(); ++next_)
        if (!left_queue_[next_] && opt_.observer != nullptr)
            opt_.observer->on_cancel(jobs_[next_], results_[next_]);
}

Expected<void> Run::loop()
{
    for (;;) {
        start_ready();
        if (set_.empty() && (stopping_ || (next_ >= jobs_.size() && again_.empty())))
            break;

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
    for (const auto& j : abandoned_)
        std::erase(pids, j->pid());
    for (pid_t helper : helpers_.pids())
        std::erase(pids, helper);
    return pids;
}

// Waits for children to exit until `deadline`, reaping whatever exits; a
// stop signal meanwhile still counts, and a second one ends the wait.
void Run::wait_for_escapees(Clock::time_point deadline)
{
    for (;;) {
        if (escapees().empty())
            return;
        const auto now = Clock::now();
        if (now >= deadline)
            return;
        const auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
        auto what = set_.wait(static_cast<int>(ms));
        if (!what)
            return;  // the poll itself failed: the SIGKILL that follows does not depend on it
        for (int sig : what->signals) {
            if (sig != SIGINT && sig != SIGTERM && sig != SIGHUP)
                continue;
            if (stopped_by_signal_ == 0)
                stopped_by_signal_ = sig;
            else
                force_kill_ = true;
        }
        if (force_kill_)
            return;
    }
}

// Without cgroups, a process that left its job's session and process group
// (setsid, setpgid) escapes the job's signals; once its parent is gone it is
// re-parented to us as subreaper. Nothing of a run may outlive it.
void Run::sweep_escapees()
{
    if (!opt_.stop_escapees || cgroup_ != nullptr)
        return;
    auto pids = escapees();
    if (pids.empty())
        return;
    std::string list;
    for (pid_t pid : pids) {
        if (!list.empty())
            list += ' ';
        list += std::to_string(pid);
    }
    notice("stopping " + std::to_string(pids.size()) + " process" + (pids.size() == 1 ? "" : "es") +
           " that left their job's process group: pid " + list);
    const auto signal_all = [](const std::vector<pid_t>& targets, int sig) {
        for (pid_t pid : targets) {
            // An escapee that made its own group takes its group with it.
            if (getpgid(pid) == pid)
                runner::signal_group(pid, sig);
            else
                (void)kill(pid, sig);  // ESRCH: already gone
            if (sig == SIGTERM)
                (void)kill(pid, SIGCONT);  // ESRCH: already gone
        }
    };
    signal_all(pids, force_kill_ ? SIGKILL : SIGTERM);
    wait_for_escapees(Clock::now() + to_duration(force_kill_ ? 0 : opt_.kill_grace_s));
    pids = escapees();
    if (pids.empty())
        return;
    signal_all(pids, SIGKILL);
    wait_for_escapees(Clock::now() + wait_after_kill);
}

// While the run lasts, orphans of the jobs are re-parented to this process,
// so their exits wake the loop and are reaped at once.
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

Expected<std::string> describe_containment(Containment mode)
{
    if (mode == Containment::process_group)
        return std::string("process groups (--contain pgroup)");
    auto dir = runner::own_cgroup_dir();
    if (dir)
        return "cgroup v2 (a cgroup per job under " + *dir + ")";
    if (mode == Containment::cgroup)
        return fail("cannot contain jobs in cgroups: " + dir.error().message);
    return "process groups (no usable cgroup v2: " + dir.error().message + ")";
}

Expected<RunSummary> run_jobs(std::vector<Job> jobs, const RunOptions& options)
{
    DevicePool pool(options.pool);
    std::size_t most = pool.size();
    if (options.slurm) {
        most = 0;
        for (const auto& n : options.slurm->nodes)
            most = std::max(most, n.devices);
        if (options.slurm->nodes.empty())
            return fail("the Slurm allocation has no nodes");
    }
    const PortPool ports(options.port_low, options.port_high);
    for (const Job& job : jobs) {
        if (job.device_count > most)
            return fail("job '" + job.label + "' needs " + std::to_string(job.device_count) + " devices but the " +
                        (options.slurm ? "largest node has " : "pool has ") + std::to_string(most));
        if (job.port_count > ports.size())
            return fail("job '" + job.label + "' needs " + std::to_string(job.port_count) + " ports but the range " +
                        std::to_string(options.port_low) + "-" + std::to_string(options.port_high) + " has " +
                        std::to_string(ports.size()));
    }

    std::optional<runner::RunCgroup> cgroup;
    std::string cgroup_notice;
    // Under Slurm the tasks are slurmd's children; a cgroup around srun
    // would only let cgroup.kill SIGKILL srun and orphan its step.
    if (options.containment != Containment::process_group && !options.slurm) {
        auto made = runner::RunCgroup::create();
        if (made)
            cgroup = std::move(*made);
        else if (options.containment == Containment::cgroup)
            return fail("cannot contain jobs in cgroups: " + made.error().message);
        if (cgroup && cgroup->stale_stopped() > 0)
            cgroup_notice = "stopped " + std::to_string(cgroup->stale_stopped()) +
                            " processes left in its cgroups by an earlier pto-par run that was killed";
    }

    auto signals = runner::SignalChannel::open(options.handle_signals, options.watched_signals);
    if (!signals)
        return tl::unexpected(signals.error());
    UniqueFd dev_null(open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!dev_null)
        return tl::unexpected(sys_error("open /dev/null", errno));
    SubreaperScope subreaper;
    const runner::Environment env;
    const runner::LaunchContext ctx{&env, dev_null.get()};
    runner::Helpers helpers(ctx);

    // Declared last, destroyed first: a Run that ends by an error or an
    // exception stops and reaps whatever of its jobs still runs.
    Run run(jobs, options, *signals, ctx, cgroup ? &*cgroup : nullptr, helpers);
    if (!cgroup_notice.empty() && options.observer != nullptr)
        options.observer->on_notice(cgroup_notice);
    if (auto ok = run.loop(); !ok)
        return tl::unexpected(ok.error());
    return run.take();
}

}  // namespace pto
