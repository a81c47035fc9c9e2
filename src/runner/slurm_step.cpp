#include "runner/slurm_step.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>

#include "common/signal_names.hpp"

namespace pto::runner {
namespace {

// scancel answers in tens of milliseconds; one that hangs past this at the
// end of a run (slurmctld gone) is left to finish or die with its session.
constexpr int helper_wait_ms = 2000;

// Runs in the step, on the node: says where it runs and what it got, in one
// write so that nothing of the job can come before it, then becomes the job.
constexpr const char* header_script =
    "printf '\\036pto-par-step %s.%s %s %s\\n' \"$SLURM_JOB_ID\" \"$SLURM_STEP_ID\" \"$SLURMD_NODENAME\" "
    "\"${SLURM_STEP_GPUS-}\" && exec \"$@\"";

}  // namespace

Helpers::~Helpers()
{
    for (pid_t pid : pids_) {
        const long pidfd = syscall(SYS_pidfd_open, pid, 0);
        if (pidfd >= 0) {
            pollfd p{static_cast<int>(pidfd), POLLIN, 0};
            (void)poll(&p, 1, helper_wait_ms);  // a timeout leaves it to PDEATHSIG
            (void)close(static_cast<int>(pidfd));
        }
        (void)waitpid(pid, nullptr, WNOHANG);  // still running: it dies with us (PDEATHSIG)
    }
}

void Helpers::spawn(const std::vector<std::string>& argv)
{
    LaunchSpec spec;
    spec.argv = argv;
    auto child = launch(spec, ctx_);
    // Its output is not read: scancel says nothing when it works, and when
    // it fails the stop escalates to SIGKILL and then to the quarantine
    // notice, which names the job. A failed spawn takes the same road.
    if (child)
        pids_.push_back(child->pid);
}

bool Helpers::forget(pid_t pid)
{
    const auto it = std::find(pids_.begin(), pids_.end(), pid);
    if (it == pids_.end())
        return false;
    pids_.erase(it);
    return true;
}

std::string_view StepState::filter(std::string_view bytes)
{
    if (header_done_)
        return bytes;
    const std::string_view marker = slurm::step_header_marker;
    passed_.clear();
    pending_.append(bytes);
    std::size_t from = 0;
    while (!header_done_) {
        const auto nl = pending_.find('\n', from);
        const std::string_view rest = std::string_view(pending_).substr(from);
        if (nl == std::string::npos) {
            // A partial line that may still grow into the header waits;
            // anything else is output now.
            if (!marker.starts_with(rest.substr(0, marker.size())) || rest.size() > 4096) {
                passed_.append(rest);
                from = pending_.size();
            }
            break;
        }
        const std::string_view line = std::string_view(pending_).substr(from, nl - from);
        from = nl + 1;
        if (!line.starts_with(marker)) {
            passed_.append(line);
            passed_.push_back('\n');
            continue;
        }
        auto parsed = slurm::parse_step_header(line.substr(marker.size()));
        if (parsed)
            header_ = std::move(*parsed);
        else
            passed_.append("pto-par: " + parsed.error().message + "\n");
        header_done_ = true;
        passed_.append(std::string_view(pending_).substr(from));
        from = pending_.size();
    }
    pending_.erase(0, from);
    return passed_;
}

std::string StepState::take_pending()
{
    header_done_ = true;
    return std::exchange(pending_, {});
}

void StepState::signal(int sig, pid_t srun_pid) const
{
    if (header_) {
        // --ctld: Slurm 22.05's scancel otherwise signals every node of the
        // allocation and exits 225 for those the step is not on.
        control_->helpers->spawn({control_->scancel, "--ctld", "--signal=" + signal_name(sig).substr(3),
                                 header_->step});
        return;
    }
    if (sig == SIGTERM || sig == SIGKILL)
        (void)kill(srun_pid, SIGKILL);  // ESRCH: it has just ended, which is what was wanted
}

std::vector<std::string> step_argv(const SlurmOptions& slurm, const std::string& node, std::size_t gpus,
                                   const std::vector<std::string>& argv)
{
    // --exact: the step takes only what it asks for, so steps share the
    // node. --gres=none for a job without devices: a step otherwise gets
    // every GPU the allocation holds on the node. -Q: srun's "step creation
    // temporarily disabled, retrying" is queueing, not the job's output.
    std::vector<std::string> out{slurm.srun,
                                 "--exact",
                                 "-Q",
                                 "-N1",
                                 "-n1",
                                 "-w",
                                 node,
                                 gpus == 0 ? std::string("--gres=none") : "--gres=gpu:" + std::to_string(gpus),
                                 "/bin/sh",
                                 "-c",
                                 header_script,
                                 "pto-par-step"};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
}

}  // namespace pto::runner
