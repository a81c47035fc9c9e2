// Health checks under --launcher slurm (SlurmOptions::device_check). Slurm,
// not the run, picks which GPUs of a node a step gets (the lowest free
// ones), so the checks run in the steps themselves (agent/step_agent.hpp):
// the run tells each step which GPUs of its node it trusts, takes the
// verdicts the agent sends, and a step that found a sick GPU keeps holding
// its GPUs until the run ends, so that Slurm gives that GPU to nobody. The
// job it was for runs again: it never ran when the check came before its
// line; after a line that failed, once more elsewhere, as a local run does.
#include "runner/run.hpp"

#include <sys/wait.h>

#include <algorithm>

#include <pto/devices.hpp>

#include "slurm/step_checks.hpp"

namespace pto::runner {

// What the step is told: the GPUs of `node` checked and not failed on since.
std::string Run::trusted_on(const std::string& node) const
{
    const auto it = trusted_.find(node);
    return std::string(slurm::trusted_gpus_variable) + "=" +
           (it == trusted_.end() ? std::string() : format_device_list(it->second));
}

// A job failed or ran out of time on these GPUs and no check of its step
// said otherwise: the next step that gets them checks them first.
void Run::distrust(const std::string& node, const std::vector<int>& gpus)
{
    const auto it = trusted_.find(node);
    if (it == trusted_.end())
        return;
    std::erase_if(it->second, [&gpus](int id) { return std::find(gpus.begin(), gpus.end(), id) != gpus.end(); });
}

// The verdicts the step's agent sent since the last look: trusted, or sick
// (said once, with what its check printed).
void Run::take_verdicts(JobProcess& j)
{
    StepState* step = j.step();
    if (step == nullptr)
        return;
    for (auto& v : step->take_verdicts()) {
        auto& trusted = trusted_[step->node()];
        const auto at = std::lower_bound(trusted.begin(), trusted.end(), v.gpu);
        const bool known = at != trusted.end() && *at == v.gpu;
        if (v.why.empty()) {
            if (!known)
                trusted.insert(at, v.gpu);
            continue;
        }
        if (known)
            trusted.erase(at);
        const NodeDevice sick{step->node(), v.gpu};
        const auto place = std::lower_bound(sick_on_nodes_.begin(), sick_on_nodes_.end(), sick);
        if (place != sick_on_nodes_.end() && *place == sick)
            continue;
        sick_on_nodes_.insert(place, sick);
        if (opt_.observer != nullptr) {
            JobOutput output = JobOutput::tail_only(opt_.output_memory_limit);
            output.append(v.output);
            output.settle();
            opt_.observer->on_device_sick(sick.node, sick.id, v.why, output);
        }
    }
}

// The step found a sick GPU and holds its GPUs from now on: they are
// withheld, and the job runs again (before its line: it never ran).
void Run::hold(JobProcess& j)
{
    j.holding = true;
    j.life.clear_limit();
    const std::size_t i = j.index();
    placement::Grant gpus = grants_[i];
    placement::Grant ports;
    ports.ports = std::exchange(gpus.ports, {});
    withhold_step(gpus);
    placement_.release(ports);
    if (!j.start_reported) {
        j.relaunch = true;
        never_ran(j);
        cancel_unfittable();
        return;
    }
    // Its line ended of itself before any stop (the agent checks only then).
    j.life.set_stopped_by_us(false);
    JobResult& res = results_[i];
    // Its end frame comes before its hold frame; one that was garbled (said
    // in its output) leaves how the line ended unknown: a failure still,
    // since only a failed line's GPUs are checked after it.
    if (const auto status = j.step()->wait_status(0))
        take_status(j, *status);
    else
        res.status = JobStatus::failed;
    if (res.status == JobStatus::failed && opt_.fail_fast && !will_retry(i))
        stop_all("fail-fast");
    end_try(j);
    j.output().settle();
    if (!sick_retried_[i] && !stopping_) {
        sick_retried_[i] = true;
        retry(i, j.output(), j.step()->sick());
    } else {
        report(j, false);
    }
    cancel_unfittable();
}

// The run is over but for the steps that hold sick GPUs: they are told to
// let them go (SIGTERM through scancel), and are waited for.
void Run::release_holders()
{
    for (auto& j : set_.jobs())
        if (j->holding && j->life.stage() == StopStage::none)
            j->life.stop(*j, Clock::now(), force_kill_);
}

}  // namespace pto::runner
