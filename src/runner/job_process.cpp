#include "runner/job_process.hpp"

#include <poll.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "runner/process_group.hpp"

namespace pto::runner {
namespace {

constexpr std::size_t pass_rest_below = 512 * 1024;
constexpr auto pass_rest = std::chrono::microseconds(100);
// How often a job whose output found no room tries again: no event says
// that a file system has room.
constexpr auto paused_retry = std::chrono::milliseconds(500);

}  // namespace

JobProcess::JobProcess(std::size_t index, pid_t pid, UniqueFd out, std::optional<JobCgroup> cgroup,
                       JobOutput output, Clock::time_point started, const StopTimes& stop_times)
    : life(stop_times), index_(index), pid_(pid), out_(std::move(out)), cgroup_(std::move(cgroup)), output_(std::move(output)),
      started_(started)
{
}

JobProcess::~JobProcess()
{
    if (!empty())
        kill_all();
    // What survived SIGKILL once will not be waited for again.
    if (leader_alive() && life.stage() != StopStage::abandoned)
        (void)reap_all_within({&pid_, 1}, teardown_wait_ms);
    // ~JobCgroup then waits for the cgroup to empty and removes it.
}

void JobProcess::read_output(std::size_t chunk, int max_reads, const std::function<void(std::string_view)>& live,
                             JobOutput::Passage passage)
{
    if (step_) {
        read_step_output(chunk, max_reads, live);
        return;
    }
    // Shown as they come and kept by nobody else: not spilled either.
    if (passage.shown)
        output_.keep_end_only();
    for (int i = 0; out_ && (max_reads == 0 || i < max_reads); ++i) {
        // To a file, only what comes before the end moves in the kernel;
        // the end is read below, and written behind it.
        if (passage.fd >= 0 && !passage.pipe)
            (void)output_.pass_before_end(out_.get(), passage);  // what it left is read below all the same
        auto got = passage.fd >= 0 && passage.pipe ? output_.pass_from_pipe(out_.get(), chunk, passage)
                                                   : JobOutput::Taken{0, false, true};
        if (got.refused) {
            // What is read from here on waits behind these bytes in the
            // sink, which then takes no more passage this time round.
            passage.fd = -1;
            got = output_.take_from_pipe(out_.get(), chunk, live);
        } else if (got.bytes > 0 && max_reads != 0) {
            // One tee takes what the pipe holds: asking again would most
            // often find it empty, at the cost of a tee and a read. A pipe
            // far from full rests a moment: a job writing 4 KiB at a time
            // woke the loop at every write (a kernel wakes a poller of a
            // pipe on each write), and those wake-ups, each paid by the
            // job's write, were most of what the live block cost. The
            // rest, 100 us, is shorter than a fast writer (5 GB/s) takes
            // to fill the widened pipe, so it is never held up for it.
            // Not when the move left bytes behind: standard output took
            // less than there was (a reader's pipe of 64 KiB), and resting
            // then only held the job up (1 GiB through `| cat` took 3.5 s).
            int left = 0;
            if (got.bytes < pass_rest_below && ioctl(out_.get(), FIONREAD, &left) == 0 && left == 0)
                resting_until_ = Clock::now() + pass_rest;
            return;
        }
        if (got.eof) {
            out_.reset();
        } else if (got.bytes == 0) {
            // No room for its output: the pipe is looked at again in a while.
            if (output_.paused())
                resting_until_ = Clock::now() + paused_retry;
            return;
        }
    }
}

// A step's output starts with srun's marker line, which is pto-par's and not
// the job's: the bytes pass through user space to have it taken out.
void JobProcess::read_step_output(std::size_t chunk, int max_reads, const std::function<void(std::string_view)>& live)
{
    std::string buf(std::min<std::size_t>(chunk, 64 * 1024), '\0');
    const auto keep = [&](std::string_view bytes) {
        if (bytes.empty())
            return;
        output_.append(bytes);
        if (live)
            live(bytes);
    };
    for (int i = 0; out_ && (max_reads == 0 || i < max_reads); ++i) {
        const ssize_t n = ::read(out_.get(), buf.data(), buf.size());
        if (n > 0) {
            keep(step_->filter(std::string_view(buf.data(), static_cast<std::size_t>(n))));
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        // EOF, or an error that makes the pipe unreadable: either way it is done.
        out_.reset();
        const std::string rest = step_->take_pending();
        keep(rest);
    }
}

int JobProcess::wait_status() const
{
    if (step_)
        return step_->wait_status(*status_).value_or(*status_);
    return *status_;
}

int JobProcess::stopped_where_it_ran() const
{
    return step_ ? step_->leftovers() : 0;
}

bool JobProcess::empty() const
{
    if (leader_alive())
        return false;
    // The agent says so only once nothing of the job is left on the node;
    // what remains here is srun's own helper, ending by itself. A step that
    // held a sick GPU ends with the run: its srun's group is waited for,
    // lest its helper outlive the run.
    if (step_ && step_->ended() && !step_->holding())
        return true;
    if (cgroup_taken_)
        return true;
    if (cgroup_)
        return !cgroup_->populated();
    return !group_exists(pid_);
}

std::optional<JobCgroup> JobProcess::take_empty_cgroup()
{
    if (!cgroup_ || leader_alive() || cgroup_->populated())
        return std::nullopt;
    cgroup_taken_ = true;
    return std::exchange(cgroup_, std::nullopt);
}

std::vector<pid_t> JobProcess::members() const
{
    if (cgroup_)
        return cgroup_->pids();
    return group_members(pid_);
}

int JobProcess::member_count() const
{
    if (cgroup_)
        return static_cast<int>(cgroup_->pids().size());
    return count_group_members(pid_);
}

void JobProcess::signal(int sig) const
{
    if (step_) {
        step_->signal(sig, pid_);
        return;
    }
    // The group first: it reaches every member in one call, and a process
    // that left the group is still found through the cgroup.
    signal_group(pid_, sig);
    if (cgroup_)
        cgroup_->signal_all(sig);
}

void JobProcess::kill_all() const
{
    if (step_) {
        step_->signal(SIGKILL, pid_);
        return;
    }
    signal_group(pid_, SIGKILL);
    if (cgroup_)
        cgroup_->kill_all();
}

}  // namespace pto::runner
