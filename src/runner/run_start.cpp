// Starting jobs: in queue order, as the placement allows, ahead of the head
// only by backfill's promise.
#include "runner/run.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "runner/clock.hpp"
#include "runner/guardian.hpp"

namespace pto::runner {
namespace {

bool is_shortage(int err)
{
    return err == EMFILE || err == ENFILE || err == EAGAIN || err == ENOMEM;
}

// A shortage is waited out only while something of the run will end by
// itself and give back what it holds: a job or a check, not a step that
// holds its GPUs until the run ends.
bool something_ends(const ProcessSet& set)
{
    return std::any_of(set.jobs().begin(), set.jobs().end(), [](const auto& j) { return !j->holding; });
}

}  // namespace

placement::Need Run::need(std::size_t index) const
{
    return {jobs_[index].device_count, jobs_[index].port_count, jobs_[index].slots};
}

void Run::start_ready()
{
    while (!stopping_) {
        const auto index = queue_.front();
        if (!index) {
            placement_.stop_waiting();
            return;
        }
        if (opt_.max_parallel != 0 && running_jobs() >= opt_.max_parallel)
            return;
        if (throttled_)
            return;  // until something of the run ends and frees what it held
        const bool retry = queue_.front_is_retry();
        auto grant = placement_.acquire(need(*index));
        if (!grant && (grant.error() == placement::Shortage::devices || grant.error() == placement::Shortage::leased)) {
            // Devices left out for their lease files may leave it none.
            if (!placement_.usable_for(need(*index))) {
                cancel_unfittable();
                continue;
            }
            note_waiting(*index);
            // Head-of-line: nothing behind it that needs devices may pass,
            // unless history says it will be done before the head can start.
            if (opt_.backfill && !retry)
                backfill(*index);
            start_unplaced(*index);
            return;
        }
        if (!grant && grant.error() == placement::Shortage::lease_failed) {
            const Error& why = placement_.lease_error();
            if (is_shortage(why.sys_errno) && something_ends(set_)) {
                throttle(why);
                return;
            }
            fail_to_start(*index, {}, why);
            queue_.pop_front();
            continue;
        }
        if (!grant) {
            // A running job's ports come back when it ends; with nothing of
            // ours running, waiting could be for ever.
            if (retry || !set_.empty())
                return;
            fail_to_start(*index, {},
                          Error{"no " + std::to_string(jobs_[*index].port_count) + " consecutive free TCP ports in " +
                                    std::to_string(placement_.port_low()) + "-" +
                                    std::to_string(placement_.port_high()) +
                                    " (something else on this machine holds them)",
                                0});
            queue_.pop_front();
            continue;
        }
        if (!start(*index, std::move(*grant)))
            return;  // stays at the head
        queue_.pop_front();
        if (!retry)
            for (const auto& d : ledger_.head_started(*index, Clock::now())) {
                char late[32];
                std::snprintf(late, sizeof late, "%.1f", seconds(d.by));
                notice("backfilled job '" + jobs_[d.job].label + "' ran past its history and delayed '" +
                       jobs_[*index].label + "' by " + late + "s");
            }
    }
}

// The head waits for what another run leases: said once for each thing
// and holder it waits for.
void Run::note_waiting(std::size_t index)
{
    const auto& w = placement_.waiting();
    if (!w)
        return;
    std::string what = w->yielded ? w->what + " (left to another run that waits for it)"
                                  : w->what + " (held by another run" +
                                        (w->holder.pid != 0 ? ", " + w->holder.text() : std::string()) + ")";
    if (waiting_job_ == index && what == waiting_for_)
        return;
    waiting_job_ = index;
    waiting_for_ = std::move(what);
    if (opt_.observer != nullptr)
        opt_.observer->on_waiting(jobs_[index], waiting_for_);
}

// EASY backfill: the head waits for devices; the time it can start at the
// latest is when enough of the running jobs will have ended, by their
// history. A later job with history that fits in the free devices now and
// ends before that starts ahead of it; no job without history ever does.
void Run::backfill(std::size_t head)
{
    const auto now = Clock::now();
    std::vector<queue::RunningEnd> ends;
    for (const auto& j : set_.jobs()) {
        if (j->holding)
            continue;  // no job's: its GPUs are withheld
        if (j->is_check())
            return;  // a check's end, and its verdict, history cannot tell
        const auto& expected = jobs_[j->index()].expected_s;
        if (!expected)
            return;  // an end history cannot tell: nothing may pass
        ends.push_back({std::max(now, j->started() + to_duration(*expected)), &grants_[j->index()]});
    }
    const auto shadow = queue::shadow_time(need(head), std::move(ends), placement_);
    if (!shadow)
        return;
    for (std::size_t i : queue_.behind_head()) {
        if (opt_.max_parallel != 0 && running_jobs() >= opt_.max_parallel)
            return;
        const auto& expected = jobs_[i].expected_s;
        if (!expected || now + to_duration(*expected) > *shadow)
            continue;
        auto grant = placement_.acquire(need(i));
        if (!grant)
            continue;
        if (!start(i, std::move(*grant)))
            return;
        queue_.take(i);
        ledger_.went_ahead(i, head, now + to_duration(*expected), *shadow);
    }
}

// A job that needs nothing placed takes nothing the head waits for: it
// passes it, within -j.
void Run::start_unplaced(std::size_t head)
{
    while (unplaced_next_ < unplaced_.size() && !stopping_) {
        if (opt_.max_parallel != 0 && running_jobs() >= opt_.max_parallel)
            return;
        const std::size_t i = unplaced_[unplaced_next_];
        // The head itself needs devices; a job started or gone never waits
        // in file order again (a retry waits ahead of the head).
        if (i == head || !queue_.waits_in_order(i)) {
            ++unplaced_next_;
            continue;
        }
        auto grant = placement_.acquire(need(i));
        if (!grant || !start(i, std::move(*grant)))
            return;
        queue_.take(i);
        ++unplaced_next_;
    }
}

void Run::fail_to_start(std::size_t index, placement::Grant grant, const Error& why)
{
    JobResult& res = results_[index];
    res.devices = grant.devices;
    res.ports = grant.ports;
    res.start = unix_now();
    res.end = res.start;
    res.duration_s = 0;
    res.status = JobStatus::failed;
    res.error = why.message;
    placement_.release(grant);
    ++finished_;
    if (opt_.observer != nullptr)
        opt_.observer->on_finish(jobs_[index], res, JobOutput{});
    if (opt_.fail_fast)
        stop_all("fail-fast");
}

// Holds further starts until a process of the run ends (finish_ended) and
// gives back what it held; said once.
void Run::throttle(const Error& why)
{
    throttled_ = true;
    if (throttle_notice_given_)
        return;
    throttle_notice_given_ = true;
    const int err = why.sys_errno;
    const bool fds = err == EMFILE || err == ENFILE;
    const char* what = fds ? "out of file descriptors" : err == EAGAIN ? "out of processes" : "out of memory";
    const char* raise = fds              ? " (raise 'ulimit -n' to run more at once)"
                        : err == EAGAIN ? " (raise 'ulimit -u' to run more at once)"
                                        : "";
    notice(std::string(what) + " with " + std::to_string(running_jobs()) + " jobs running (" + why.message +
           "); each further job waits for one to end" + raise);
}

// Everything a process needs is taken before it starts (its spill file's
// descriptor, its cgroup, its pipe, the process itself): a shortage then
// makes it wait, and never loses output it would have written.
Expected<std::unique_ptr<JobProcess>> Run::spawn(std::size_t index, const LaunchSpec& spec, JobOutput output,
                                                 const StopTimes& times)
{
    const auto started = Clock::now();
    std::optional<JobCgroup> cgroup;
    if (cgroup_ != nullptr) {
        auto cg = cgroup_->make_job("job-" + std::to_string(++launches_));
        if (!cg)
            return tl::unexpected(cg.error());
        cgroup = std::move(*cg);
    }
    auto child = launch(spec, ctx_, cgroup ? cgroup->dir_fd() : -1);
    if (cgroup)
        cgroup->close_start_fds();
    if (!child)
        return tl::unexpected(child.error());
    // Jobs and device checks alike: nothing of them may outlive the run.
    if (ctx_.guardian != nullptr)
        ctx_.guardian->job_started(child->pid);
    return std::make_unique<JobProcess>(index, child->pid, std::move(child->output), std::move(cgroup),
                                        std::move(output), started, times);
}

// False when the job could not start for lack of a resource (descriptors,
// processes, memory) while others run, or waits for the first check of a
// device it got: it stays at the head of the queue until one of them ends
// and gives back what it held.
bool Run::start(std::size_t index, placement::Grant grant)
{
    if (!unchecked_.empty() && check_first(grant))
        return false;  // stays at the head until its devices are checked
    const Job& job = jobs_[index];
    auto spec = job.build ? job.build(Allocation{grant.devices, grant.ports}) : fail("job has no build function");
    if (!spec) {
        fail_to_start(index, std::move(grant), spec.error());
        return true;
    }
    std::string step;
    if (!grant.node.empty()) {
        step = step_name(++steps_launched_);
        spec->argv = step_argv(*opt_.slurm, grant.node, job.device_count, step, spec->argv);
        if (opt_.slurm->device_check)
            spec->env.push_back(trusted_on(grant.node));
    }
    auto output = opt_.whole_output || opt_.keep_output
                      ? JobOutput::reserve(opt_.spill_place, opt_.output_memory_limit)
                      : Expected<JobOutput>(JobOutput::tail_only(opt_.output_memory_limit));
    auto j = output ? spawn(index, *spec, std::move(*output), stop_times_)
                    : Expected<std::unique_ptr<JobProcess>>(tl::unexpected(output.error()));
    if (!j) {
        if (is_shortage(j.error().sys_errno) && something_ends(set_)) {
            placement_.release(grant);
            throttle(j.error());
            return false;
        }
        fail_to_start(index, std::move(grant), j.error());
        return true;
    }
    JobResult& res = results_[index];
    res.devices = grant.devices;
    res.ports = grant.ports;
    res.start = unix_now();
    res.pid = (*j)->pid();
    if (!step.empty()) {
        // It starts when its task runs: until then it waits for Slurm.
        res.node = grant.node;
        (*j)->set_step(StepState(grant.node, step_control_, step));
    }
    grants_[index] = std::move(grant);
    if (step.empty()) {
        if (const auto limit = job.timeout_s ? job.timeout_s : opt_.job_timeout_s)
            (*j)->life.set_limit((*j)->started() + to_duration(*limit));
        (*j)->start_reported = true;
    }
    set_.add(std::move(*j));
    if (step.empty() && opt_.observer != nullptr)
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
        j.life.set_limit(now + to_duration(*limit));
    if (opt_.observer != nullptr)
        opt_.observer->on_start(job, res);
}

}  // namespace pto::runner
