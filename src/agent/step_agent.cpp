#include "agent/step_agent.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "common/signal_names.hpp"
#include "common/unique_fd.hpp"
#include "report/fd_writer.hpp"
#include "runner/process_group.hpp"
#include "slurm/allocation.hpp"
#include "slurm/step_checks.hpp"

extern char** environ;

namespace pto::agent {
namespace {

using Clock = std::chrono::steady_clock;

void say(const std::string& text)
{
    // Our stderr is the step's, which srun hands to the run: the run's only
    // way to hear of it. A failed write has nowhere else to go.
    (void)report::write_all(STDERR_FILENO, "pto-par (step agent): " + text + "\n");
}

// Every signal the step's processes may get from Slurm, which the agent
// must live through to see the job to its end; SIGCHLD is read from a
// signalfd.
sigset_t agent_signals()
{
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGPIPE, SIGCHLD})
        sigaddset(&set, sig);
    return set;
}

// Signals the run sends to stop a step (through scancel, to every process
// of it): one pending means the run stopped the line, or a check, itself.
bool stop_signal_pending()
{
    sigset_t pending;
    if (sigpending(&pending) != 0)
        return false;  // cannot fail with a valid pointer
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1})
        if (sigismember(&pending, sig) == 1)
            return true;
    return false;
}

// Whether the run stopped a line that died of `sig`. Slurm's proctrack
// signals a step's processes one at a time, the line's often before the
// agent's, so a line killed by the run's stop can end before that stop is
// pending here: a line dead of a stop signal waits for the agent's own, a
// moment (the rest of that loop) and no longer, so that a line that killed
// itself is still checked.
bool stopped_by_run(int sig)
{
    if (stop_signal_pending())
        return true;
    sigset_t stops;
    sigemptyset(&stops);
    bool stop_signal = false;
    for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1}) {
        sigaddset(&stops, s);
        stop_signal = stop_signal || s == sig;
    }
    if (!stop_signal)
        return false;
    const timespec moment{1, 0};
    for (;;) {
        const int got = sigtimedwait(&stops, nullptr, &moment);
        if (got > 0) {
            // Taken by the wait: pending again, for what follows to see.
            (void)raise(got);  // cannot fail for a valid signal
            return true;
        }
        if (errno != EINTR)
            return false;  // EAGAIN: the moment passed with no stop
    }
}

// The line (or a check), in the agent's process group (which
// proctrack/pgid signals), its standard error joined to its standard output
// (`out`), with the signal mask the step started with.
pid_t spawn_line(const char* shell, const std::string& command, const sigset_t& mask, int& err,
                 int out = STDOUT_FILENO)
{
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    if ((err = posix_spawn_file_actions_init(&actions)) != 0)
        return -1;
    if ((err = posix_spawnattr_init(&attr)) != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return -1;
    }
    // These setters fail only for bad arguments, which these are not.
    if (out != STDOUT_FILENO)
        (void)posix_spawn_file_actions_adddup2(&actions, out, STDOUT_FILENO);
    (void)posix_spawn_file_actions_adddup2(&actions, out, STDERR_FILENO);
    (void)posix_spawnattr_setsigmask(&attr, &mask);
    (void)posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    char* const argv[] = {const_cast<char*>(shell), const_cast<char*>("-c"), const_cast<char*>(command.c_str()),
                          nullptr};
    pid_t pid = -1;
    err = posix_spawn(&pid, shell, &actions, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    return err == 0 ? pid : -1;
}

// Reaps every child that has ended; false once there are none at all.
bool reap_some()
{
    for (;;) {
        const pid_t r = waitpid(-1, nullptr, WNOHANG);
        if (r > 0)
            continue;
        if (r < 0 && errno == EINTR)
            continue;
        return !(r < 0 && errno == ECHILD);
    }
}

// Stops what the line left, and returns once nothing under the agent is
// left: SIGTERM and SIGCONT to each, SIGKILL to whatever is there when the
// grace ends (and to anything they start after). A process with no child
// left under the agent is gone, since every orphan comes back here.
void stop_leftovers(int sigchld_fd, std::size_t count, long grace_ms)
{
    if (count == 0 && !reap_some())
        return;
    for (pid_t pid : runner::descendants_of_this_process()) {
        (void)kill(pid, SIGTERM);  // ESRCH: already gone, which is the goal
        (void)kill(pid, SIGCONT);
    }
    const auto kill_at = Clock::now() + std::chrono::milliseconds(grace_ms);
    while (reap_some()) {
        const auto now = Clock::now();
        int wait_ms = 100;
        if (now >= kill_at)
            for (pid_t pid : runner::descendants_of_this_process())
                (void)kill(pid, SIGKILL);
        else
            wait_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(kill_at - now).count()) + 1;
        pollfd p{sigchld_fd, POLLIN, 0};
        if (poll(&p, 1, wait_ms) > 0) {
            signalfd_siginfo info;
            (void)!read(sigchld_fd, &info, sizeof info);  // only to clear it; waitpid says what ended
        }
    }
}

// Keeps the last check_output_kept bytes of what a check printed.
void keep_tail(std::string& tail, const char* bytes, std::size_t n)
{
    tail.append(bytes, n);
    if (tail.size() > slurm::check_output_kept)
        tail.erase(0, tail.size() - slurm::check_output_kept);
}

// Reads what `fd` holds now; false at EOF or on an error.
bool read_some(int fd, std::string& tail)
{
    char buf[4096];
    for (;;) {
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) {
            keep_tail(tail, buf, static_cast<std::size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 && errno == EAGAIN;
    }
}

// One GPU's check, as a local run checks a device: its own output pipe (the
// words go into the verdict, never into the job's output), the timeout,
// and what it leaves stopped before the verdict. Nothing when the run
// stopped the step meanwhile: that says nothing of the GPU.
std::optional<slurm::CheckVerdict> check_gpu(const Step& step, int gpu, int sigchld_fd, const sigset_t& mask)
{
    slurm::CheckVerdict v{gpu, {}, {}};
    auto command = step.prepare(std::span<const int>(&gpu, 1), step.checks->command);
    if (!command) {
        v.why = "its check could not start: " + command.error().message;
        return v;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        v.why = std::string("its check could not start: pipe2: ") + std::strerror(errno);
        return v;
    }
    UniqueFd from(fds[0]);
    UniqueFd to(fds[1]);
    int err = 0;
    const pid_t pid = spawn_line(step.shell, *command, mask, err, to.get());
    to.reset();
    if (pid < 0) {
        v.why = std::string("its check could not start: ") + std::strerror(err);
        return v;
    }
    (void)fcntl(from.get(), F_SETFL, O_NONBLOCK);  // cannot fail on an open pipe
    const auto deadline = Clock::now() + std::chrono::milliseconds(step.checks->timeout_ms);
    int status = 0;
    bool timed_out = false;
    for (;;) {
        const pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        const auto now = Clock::now();
        if (now >= deadline) {
            timed_out = true;
            break;
        }
        pollfd p[2] = {{from.get(), POLLIN, 0}, {sigchld_fd, POLLIN, 0}};
        // Without a signalfd (-1) its end is seen within a second.
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
        if (poll(p, 2, static_cast<int>(std::min<long long>(left, 1000))) <= 0)
            continue;  // a timeout or EINTR: the loop looks again
        if (p[0].revents != 0 && !read_some(from.get(), v.output))
            from.reset();  // EOF or an error: nothing more to read
        if (p[1].revents != 0) {
            signalfd_siginfo info;
            (void)!read(sigchld_fd, &info, sizeof info);  // only to clear it; waitpid says what ended
        }
    }
    // Out of time, the check and all it started get SIGTERM, then SIGKILL.
    stop_leftovers(sigchld_fd, timed_out ? 1 : runner::descendants_of_this_process().size(), step.grace_ms);
    if (from)
        (void)read_some(from.get(), v.output);  // nothing writes any more: what is left in the pipe
    if (stop_signal_pending())
        return std::nullopt;
    if (timed_out) {
        char limit[32];
        std::snprintf(limit, sizeof limit, "%g", static_cast<double>(step.checks->timeout_ms) / 1000);
        v.why = std::string("its check ran past --device-check-timeout (") + limit + "s)";
    } else if (WIFSIGNALED(status)) {
        v.why = "its check died of " + signal_name(WTERMSIG(status));
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        v.why = "its check exited " + std::to_string(WEXITSTATUS(status));
    }
    if (v.why.empty())
        v.output.clear();
    return v;
}

enum class Health { good, sick, stopped };

// Checks `gpus` and writes a frame for each verdict. A stop signal ends
// the checks without a verdict: the step was stopped.
Health check_gpus(const Step& step, const std::vector<int>& gpus, int sigchld_fd, const sigset_t& mask)
{
    Health health = Health::good;
    for (int gpu : gpus) {
        const auto v = stop_signal_pending() ? std::nullopt : check_gpu(step, gpu, sigchld_fd, mask);
        if (!v)
            return Health::stopped;
        if (!report::write_all(STDOUT_FILENO, slurm::format_check_frame(*v)))
            return Health::stopped;  // the run is gone: nobody to hold the GPU for
        if (!v->why.empty())
            health = Health::sick;
    }
    return health;
}

// A sick GPU is kept from every later step by this one: the hold frame,
// then nothing until the run's SIGTERM (or Slurm's SIGKILL) ends it.
int hold(const Step& step)
{
    if (!report::write_all(STDOUT_FILENO, std::string(slurm::step_hold_marker) + step.id + "\n"))
        return 0;  // the run is gone: the step may end
    sigset_t stop;
    sigemptyset(&stop);
    for (int sig : {SIGTERM, SIGINT, SIGHUP})
        sigaddset(&stop, sig);
    while (sigwaitinfo(&stop, nullptr) < 0 && errno == EINTR) {
    }
    return 0;
}

// The step's GPUs not in `trusted`, in order.
std::vector<int> untrusted(const std::vector<int>& gpus, const std::vector<int>& trusted)
{
    std::vector<int> out;
    for (int gpu : gpus)
        if (std::find(trusted.begin(), trusted.end(), gpu) == trusted.end())
            out.push_back(gpu);
    return out;
}

}  // namespace

int run_step(const Step& step)
{
    const sigset_t blocked = agent_signals();
    sigset_t original;
    if (sigprocmask(SIG_BLOCK, &blocked, &original) != 0) {
        say(std::string("sigprocmask: ") + std::strerror(errno));
        return 126;
    }
    // SIGCHLD alone: the stop signals stay pending, for stop_signal_pending.
    sigset_t child;
    sigemptyset(&child);
    sigaddset(&child, SIGCHLD);
    UniqueFd sigchld(signalfd(-1, &child, SFD_CLOEXEC | SFD_NONBLOCK));
    // Without a subreaper (a kernel before 3.4) what the line leaves goes to
    // pid 1, beyond this agent: said, and run anyway.
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        say(std::string("cannot be a child subreaper (") + std::strerror(errno) +
            "): processes that leave the job are not stopped");
    if (step.checks != nullptr) {
        const Health before = check_gpus(step, untrusted(step.gpus, step.checks->trusted), sigchld.get(), original);
        // Stopped before its line: the run sees a step that ended as by SIGTERM.
        if (before == Health::stopped)
            return 128 + SIGTERM;
        if (before == Health::sick)
            return hold(step);
    }
    if (!report::write_all(STDOUT_FILENO, step.header))
        return 126;  // the run is gone: nobody to run the job for

    int err = 0;
    auto command = step.prepare(step.gpus, step.command);
    const pid_t leader = command ? spawn_line(step.shell, *command, original, err) : -1;
    int status = 126 << 8;  // as a shell that cannot run a command
    std::size_t left = 0;
    bool check_after = false;
    if (!command) {
        say(command.error().message);
    } else if (leader < 0) {
        say(std::string("cannot run ") + step.shell + ": " + std::strerror(err));
    } else {
        for (;;) {
            const pid_t r = waitpid(-1, &status, 0);
            if (r == leader)
                break;
            if (r < 0 && errno != EINTR) {
                say(std::string("waitpid: ") + std::strerror(errno));
                status = 126 << 8;
                break;
            }
        }
        // A line that failed of itself (no stop of the run's reached the
        // step) may have met a sick GPU.
        check_after = step.checks != nullptr && (!WIFEXITED(status) || WEXITSTATUS(status) != 0) &&
                      !stopped_by_run(WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        left = runner::descendants_of_this_process().size();
        // Without a signalfd (-1) the waits are plain sleeps: poll ignores the fd.
        stop_leftovers(sigchld.get(), left, step.grace_ms);
    }
    const bool sick = check_after && check_gpus(step, step.gpus, sigchld.get(), original) == Health::sick;
    // The last bytes of the job: nothing of it is left to write more.
    const std::string end = std::string(slurm::step_end_marker) + std::to_string(status) + " " +
                            std::to_string(left) + "\n";
    if (!report::write_all(STDOUT_FILENO, end))
        return 126;
    return sick ? hold(step) : 0;
}

}  // namespace pto::agent
