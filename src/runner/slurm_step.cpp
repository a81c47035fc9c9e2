#include "runner/slurm_step.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "common/signal_names.hpp"
#include "runner/clock.hpp"
#include "runner/process_group.hpp"
#include "slurm/step_checks.hpp"

namespace pto::runner {
namespace {

// scancel answers in tens of milliseconds; one that hangs past this at the
// end of a run (slurmctld gone) is left to finish or die with its session.
constexpr int helper_wait_ms = 2000;

// What srun and slurmstepd say of a step in its output ("srun: error: ...",
// "slurmstepd-n2: error: *** STEP 6.2 ON n2 CANCELLED ..."): the run's
// notices, not the job's bytes. Only at the start of a line.
constexpr std::string_view slurm_prefixes[] = {"srun: ", "slurmstepd"};

// Before the header: Slurm created the step, and the node did not start it.
constexpr std::string_view launch_failure_prefix = "srun: error: Task launch for StepId=";

// A partial line longer than this is the job's, whatever it starts with.
constexpr std::size_t longest_frame = slurm::longest_frame;

// The agent's frames: a line that starts with one of these is pto-par's.
constexpr std::string_view frame_markers[] = {slurm::step_header_marker, slurm::step_end_marker,
                                              slurm::step_check_marker, slurm::step_hold_marker};

// Whether `rest`, the start of a line not yet whole, may still be a frame.
bool may_be_frame(std::string_view rest)
{
    if (rest.size() > longest_frame)
        return false;
    for (const auto marker : frame_markers)
        if (rest.size() < marker.size() ? marker.starts_with(rest) : rest.starts_with(marker))
            return true;
    return false;
}

// Whether `line`, whole and without its newline, is a frame: a line that
// only begins like a marker ("\x1epto-par-ho") is the job's.
bool is_frame(std::string_view line)
{
    if (line.size() > longest_frame)
        return false;
    return std::any_of(std::begin(frame_markers), std::end(frame_markers),
                       [&](std::string_view marker) { return line.starts_with(marker); });
}

}  // namespace

Helpers::~Helpers()
{
    // All at once: N hanging ones cost one wait, not N. Those still running
    // then die with us (PDEATHSIG).
    (void)reap_all_within(pids_, helper_wait_ms);
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
    passed_.clear();
    if (header_done_) {
        pending_.append(bytes);
        filter_body();
        return passed_;
    }
    const std::string_view marker = slurm::step_header_marker;
    pending_.append(bytes);
    std::size_t from = 0;
    while (!header_done_) {
        const auto nl = pending_.find('\n', from);
        const std::string_view rest = std::string_view(pending_).substr(from);
        if (nl == std::string::npos) {
            // A partial line that may still grow into a frame waits;
            // anything else is output now.
            if (!may_be_frame(rest)) {
                passed_.append(rest);
                from = pending_.size();
            }
            break;
        }
        const std::string_view line = std::string_view(pending_).substr(from, nl - from);
        from = nl + 1;
        // The checks before the line: their verdicts, then the header, or
        // the hold frame when one failed (the line never runs).
        if (line.starts_with(slurm::step_check_marker) || line.starts_with(slurm::step_hold_marker)) {
            take_frame(line);
            header_done_ = holding();
            continue;
        }
        if (!line.starts_with(marker)) {
            if (launch_failure_.empty() && line.starts_with(launch_failure_prefix))
                launch_failure_ = line;
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
        pending_.erase(0, from);
        filter_body();
        return passed_;
    }
    pending_.erase(0, from);
    if (header_done_)
        filter_body();
    return passed_;
}

// A check or hold frame, whole, without its newline.
void StepState::take_frame(std::string_view line)
{
    if (line.starts_with(slurm::step_hold_marker)) {
        id_ = line.substr(slurm::step_hold_marker.size());
        holding_ = true;
        return;
    }
    auto parsed = slurm::parse_check_frame(line.substr(slurm::step_check_marker.size()));
    if (!parsed) {
        passed_.append("pto-par: " + parsed.error().message + "\n");
        return;
    }
    checked_after_line_ = header_.has_value();
    if (!parsed->why.empty())
        sick_.push_back(parsed->gpu);
    verdicts_.push_back(std::move(*parsed));
}

// After the header: the job's bytes, Slurm's own lines (to notices) and the
// agent's end frame, which may follow a partial line of the job's.
void StepState::filter_body()
{
    std::size_t from = 0;
    const std::string_view end_marker = slurm::step_end_marker;
    while (from < pending_.size()) {
        const std::string_view rest = std::string_view(pending_).substr(from);
        if (at_line_start_) {
            bool may_become = false;  // too short yet to tell
            bool slurm_line = false;
            for (const auto prefix : slurm_prefixes) {
                may_become = may_become || (rest.size() < prefix.size() && prefix.starts_with(rest));
                slurm_line = slurm_line || rest.starts_with(prefix);
            }
            const auto nl = rest.find('\n');
            if (slurm_line && nl != std::string_view::npos) {
                // A holding step's are of its release at the run's end
                // ("STEP 6.2 ON n2 CANCELLED"): nothing to tell.
                if (control_->notice && !holding())
                    control_->notice(node_ + ": " + std::string(rest.substr(0, nl)));
                from += nl + 1;
                continue;
            }
            if (may_become || (slurm_line && rest.size() <= longest_frame))
                break;  // the rest of the line is still to come
        }
        const auto stop = rest.find_first_of("\n\x1e");
        if (stop == std::string_view::npos) {
            passed_.append(rest);
            at_line_start_ = false;
            from = pending_.size();
            break;
        }
        if (rest[stop] == '\n') {
            passed_.append(rest.substr(0, stop + 1));
            at_line_start_ = true;
            from += stop + 1;
            continue;
        }
        // A frame mark: the agent's frame (the end, or the checks after a
        // line that failed), or a job's own control byte.
        passed_.append(rest.substr(0, stop));
        from += stop;
        const std::string_view frame = rest.substr(stop);
        const auto nl = frame.find('\n');
        if (nl == std::string_view::npos && may_be_frame(frame))
            break;  // the rest of the frame is still to come
        const bool whole_frame = nl != std::string_view::npos && is_frame(frame.substr(0, nl));
        if (whole_frame && frame.starts_with(end_marker)) {
            auto parsed = slurm::parse_step_end(frame.substr(end_marker.size(), nl - end_marker.size()));
            if (parsed)
                end_ = *parsed;
            else
                passed_.append("pto-par: " + parsed.error().message + "\n");
            from += nl + 1;
            continue;
        }
        if (whole_frame && !frame.starts_with(slurm::step_header_marker)) {
            take_frame(frame.substr(0, nl));
            from += nl + 1;
            continue;
        }
        passed_.push_back(frame[0]);
        at_line_start_ = false;
        from += 1;
    }
    pending_.erase(0, from);
}

std::string StepState::take_pending()
{
    header_done_ = true;
    return std::exchange(pending_, {});
}

std::optional<int> StepState::wait_status(int srun_status) const
{
    if (end_)
        return end_->wait_status;
    // The agent did not get to say (killed with the step, by scancel or
    // Slurm): srun's 128+N for a task killed by signal N is that signal.
    if (header_ && WIFEXITED(srun_status) && WEXITSTATUS(srun_status) > 128 && WEXITSTATUS(srun_status) < 128 + NSIG)
        return WEXITSTATUS(srun_status) - 128;
    return std::nullopt;
}

std::vector<slurm::CheckVerdict> StepState::take_verdicts()
{
    return std::exchange(verdicts_, {});
}

void StepState::signal(int sig, pid_t srun_pid) const
{
    if (created()) {
        // --ctld: Slurm 22.05's scancel otherwise signals every node of the
        // allocation and exits 225 for those the step is not on.
        control_->helpers->spawn({control_->scancel, "--ctld", "--signal=" + signal_name(sig).substr(3),
                                 header_ ? header_->step : id_});
        return;
    }
    if (sig == SIGTERM || sig == SIGKILL)
        (void)kill(srun_pid, SIGKILL);  // ESRCH: it has just ended, which is what was wanted
}

std::vector<std::string> step_argv(const SlurmOptions& slurm, const std::string& node, std::size_t gpus,
                                   const std::string& name, const std::vector<std::string>& argv)
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
                                 "-J",
                                 name};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
}

std::string step_name(std::size_t launch)
{
    return "pto-par." + std::to_string(getpid()) + "." + std::to_string(launch);
}

Expected<std::vector<std::string>> created_steps(const SlurmOptions& slurm, const LaunchContext& ctx)
{
    LaunchSpec spec;
    spec.argv = {slurm.squeue, "-h", "-s", "-o", "%i %j"};
    if (const char* job = std::getenv("SLURM_JOB_ID"); job != nullptr && *job != '\0')
        spec.argv.insert(spec.argv.end(), {"-j", job});
    auto child = launch(spec, ctx);
    if (!child)
        return tl::unexpected(child.error());
    std::string text;
    const auto deadline = Clock::now() + std::chrono::milliseconds(helper_wait_ms);
    for (;;) {
        char buf[4096];
        const ssize_t n = read(child->output.get(), buf, sizeof buf);
        if (n > 0) {
            text.append(buf, static_cast<std::size_t>(n));
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            break;
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0)
            break;  // squeue hangs (slurmctld gone): what it said so far
        pollfd p{child->output.get(), POLLIN, 0};
        (void)poll(&p, 1, static_cast<int>(left));  // a timeout or EINTR: the loop looks again
    }
    (void)kill(child->pid, SIGKILL);  // ESRCH: it has ended, as it should have
    int status = 0;
    while (waitpid(child->pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return fail("squeue -s failed");
    std::vector<std::string> steps;
    for (std::size_t from = 0; from < text.size();) {
        const auto nl = std::min(text.find('\n', from), text.size());
        steps.push_back(text.substr(from, nl - from));
        from = nl + 1;
    }
    return steps;
}

}  // namespace pto::runner
