// Health checks of devices (RunOptions::device_check): every device before
// the first job that uses it, and a device again after a job on it failed,
// before it is handed on. A check is a process in the run's one loop like a
// job; the devices it looks at stay held until it ends. A device whose
// check fails is sick, withheld for the rest of the run, and the job whose
// failure led to the check runs again on other devices, once.
#include "runner/run.hpp"

#include <sys/wait.h>

#include <algorithm>

#include "common/signal_names.hpp"
#include "devices/device_pool.hpp"
#include "runner/clock.hpp"

namespace pto::runner {
namespace {

placement::Grant one_device(int id, std::size_t slots)
{
    placement::Grant g;
    g.devices = {id};
    g.device_count = 1;
    g.slots = slots;
    return g;
}

// How a check that did not pass ended; empty when it passed, or when the
// run stopped it (that says nothing of the device).
std::string check_failure(const JobProcess& check, double timeout_s)
{
    if (check.life.stopped_by_us())
        return {};
    if (check.life.timed_out()) {
        char limit[32];
        std::snprintf(limit, sizeof limit, "%g", timeout_s);
        return std::string("its check ran past --device-check-timeout (") + limit + "s)";
    }
    const int status = check.wait_status();
    if (WIFSIGNALED(status))
        return "its check died of " + signal_name(WTERMSIG(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        return "its check exited " + std::to_string(WEXITSTATUS(status));
    return {};
}

}  // namespace

void Run::check_all_devices()
{
    if (!opt_.device_check || opt_.slurm)
        return;
    // One at a time: a device another run leases now is checked before
    // its first job here instead (check_first).
    CheckBatch batch;
    while (auto one = placement_.acquire({1, 0, 0}))
        batch.pieces.push_back(std::move(*one));
    const DevicePool pool(opt_.pool);
    for (int id : pool.ids())
        if (std::none_of(batch.pieces.begin(), batch.pieces.end(),
                         [id](const placement::Grant& g) { return g.devices.front() == id; }))
            unchecked_.push_back(id);
    if (batch.pieces.empty())
        return;
    batches_.push_back(std::move(batch));
    start_checks(batches_.size() - 1);
}

// True when `grant` holds a device not checked yet: those are held for
// their checks, the rest goes back, and the job waits for the verdict.
bool Run::check_first(const placement::Grant& grant)
{
    placement::Grant rest = grant;
    rest.devices.clear();
    CheckBatch batch;
    for (int id : grant.devices) {
        const auto at = std::find(unchecked_.begin(), unchecked_.end(), id);
        if (at == unchecked_.end()) {
            rest.devices.push_back(id);
            continue;
        }
        unchecked_.erase(at);
        batch.pieces.push_back(one_device(id, grant.slots));
    }
    if (batch.pieces.empty())
        return false;
    placement_.release(rest);
    batches_.push_back(std::move(batch));
    start_checks(batches_.size() - 1);
    return true;
}

// A failure of the job's own, on devices, while the run goes on: its
// devices are looked at before anything else gets them.
bool Run::wants_check(const JobProcess& j) const
{
    if (!opt_.device_check || opt_.slurm || stopping_ || j.life.stage() == StopStage::abandoned)
        return false;
    const JobStatus status = results_[j.index()].status;
    return (status == JobStatus::failed || status == JobStatus::timeout) && !grants_[j.index()].devices.empty();
}

// The job's report waits for the verdict on its devices; its ports are no
// device's and go back now.
void Run::park(std::unique_ptr<JobProcess> j)
{
    const placement::Grant& grant = grants_[j->index()];
    CheckBatch batch;
    batch.job = j->index();
    for (int id : grant.devices)
        batch.pieces.push_back(one_device(id, grant.slots));
    placement::Grant ports;
    ports.ports = grant.ports;
    placement_.release(ports);
    batch.parked = std::move(j);
    batches_.push_back(std::move(batch));
    start_checks(batches_.size() - 1);
}

void Run::start_checks(std::size_t batch)
{
    batches_[batch].pending = batches_[batch].pieces.size();
    // By index: a check that cannot start settles at once, and may end the batch.
    for (std::size_t k = 0, n = batches_[batch].pieces.size(); k < n; ++k) {
        const int id = batches_[batch].pieces[k].devices.front();
        auto spec = opt_.device_check(id);
        auto check = spec ? spawn(batch, *spec, JobOutput::tail_only(opt_.output_memory_limit), check_times_)
                          : Expected<std::unique_ptr<JobProcess>>(tl::unexpected(spec.error()));
        if (!check) {
            settle(batch, id, "its check could not start: " + check.error().message, JobOutput{});
            continue;
        }
        (*check)->checked_device = id;
        (*check)->life.set_limit((*check)->started() + to_duration(opt_.device_check_timeout_s));
        (*check)->start_reported = true;
        set_.add(std::move(*check));
    }
}

void Run::check_ended(JobProcess& check, const std::string& could_not_stop)
{
    settle(check.index(), check.checked_device,
           could_not_stop.empty() ? check_failure(check, opt_.device_check_timeout_s) : could_not_stop,
           check.output());
}

// One device's check is over: healthy, it is free again; sick (`why`), it
// is withheld for good.
void Run::settle(std::size_t batch, int id, const std::string& why, const JobOutput& output)
{
    CheckBatch& b = batches_[batch];
    const auto piece = std::find_if(b.pieces.begin(), b.pieces.end(),
                                    [id](const placement::Grant& g) { return g.devices.front() == id; });
    if (why.empty()) {
        placement_.release(*piece);
    } else {
        (void)placement_.withhold(*piece);  // false: a local pool has no CPUs to run out of
        b.sick.push_back(id);
        sick_.insert(std::upper_bound(sick_.begin(), sick_.end(), id), id);
        if (opt_.observer != nullptr)
            opt_.observer->on_device_sick({}, id, why, output);
    }
    if (--b.pending == 0)
        verdict(batch);
}

// Every device of the batch has its verdict: the parked job runs again
// elsewhere if one was sick (once), else its own verdict goes out.
void Run::verdict(std::size_t batch)
{
    CheckBatch& b = batches_[batch];
    const std::vector<int> sick = b.sick;
    if (b.job) {
        const std::unique_ptr<JobProcess> job = std::move(b.parked);
        const std::size_t i = *b.job;
        if (!sick.empty() && !sick_retried_[i] && !stopping_) {
            sick_retried_[i] = true;
            job->output().settle();
            retry(i, job->output(), sick);
        } else {
            report(*job, false);
        }
    }
    if (!sick.empty())
        cancel_unfittable();
}

}  // namespace pto::runner
