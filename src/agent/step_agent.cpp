#include "agent/step_agent.hpp"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "common/unique_fd.hpp"
#include "report/fd_writer.hpp"
#include "runner/process_group.hpp"
#include "slurm/allocation.hpp"

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

// The line, in the agent's process group (which proctrack/pgid signals),
// its standard error joined to its standard output, with the signal mask
// the step started with.
pid_t spawn_line(const char* shell, const std::string& command, const sigset_t& mask, int& err)
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
    (void)posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
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

}  // namespace

int run_step(const char* shell, const std::string& command, std::string_view header, long grace_ms)
{
    const sigset_t blocked = agent_signals();
    sigset_t original;
    if (sigprocmask(SIG_BLOCK, &blocked, &original) != 0) {
        say(std::string("sigprocmask: ") + std::strerror(errno));
        return 126;
    }
    UniqueFd sigchld(signalfd(-1, &blocked, SFD_CLOEXEC | SFD_NONBLOCK));
    // Without a subreaper (a kernel before 3.4) what the line leaves goes to
    // pid 1, beyond this agent: said, and run anyway.
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        say(std::string("cannot be a child subreaper (") + std::strerror(errno) +
            "): processes that leave the job are not stopped");
    if (!report::write_all(STDOUT_FILENO, std::string(header)))
        return 126;  // the run is gone: nobody to run the job for

    int err = 0;
    const pid_t leader = spawn_line(shell, command, original, err);
    int status = 126 << 8;  // as a shell that cannot run a command
    std::size_t left = 0;
    if (leader < 0) {
        say(std::string("cannot run ") + shell + ": " + std::strerror(err));
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
        left = runner::descendants_of_this_process().size();
        // Without a signalfd (-1) the waits are plain sleeps: poll ignores the fd.
        stop_leftovers(sigchld.get(), left, grace_ms);
    }
    // The last bytes of the step: nothing of the job is left to write more.
    const std::string end = std::string(slurm::step_end_marker) + std::to_string(status) + " " +
                            std::to_string(left) + "\n";
    return report::write_all(STDOUT_FILENO, end) ? 0 : 126;
}

}  // namespace pto::agent
