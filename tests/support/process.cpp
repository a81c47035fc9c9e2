#include "process.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <termios.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace pto::test {
namespace {

void must(bool ok, const char* what)
{
    if (!ok)
        throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

}  // namespace

Process::Process(std::vector<std::string> argv, std::string stdin_text, std::vector<std::string> env, Setup setup)
{
    int in[2], out[2], err[2];
    must(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0, "pipe2");

    std::vector<std::string> envs;
    // What would make pto-par dress its output for a CI log or a colour
    // terminal stays out, wherever the suite runs; a test asks for it.
    const auto presentational = [](std::string_view entry) {
        for (std::string_view name : {"GITHUB_ACTIONS=", "GITLAB_CI=", "NO_COLOR="})
            if (entry.substr(0, name.size()) == name)
                return true;
        return false;
    };
    // A variable the test sets replaces ours: getenv finds the first entry.
    const auto set_by_test = [&env](std::string_view entry) {
        const auto name = entry.substr(0, entry.find('=') + 1);
        return std::any_of(env.begin(), env.end(), [&](const std::string& e) { return e.starts_with(name); });
    };
    for (char** e = environ; *e != nullptr; ++e)
        if (!presentational(*e) && !set_by_test(*e))
            envs.emplace_back(*e);
    for (auto& e : env)
        envs.push_back(e);
    std::vector<char*> envp, args;
    for (auto& e : envs)
        envp.push_back(e.data());
    envp.push_back(nullptr);
    for (auto& a : argv)
        args.push_back(a.data());
    args.push_back(nullptr);

    std::string tty_name;
    const bool on_terminal = setup.terminal_cols > 0;
    if (setup.controlling_tty || on_terminal) {
        tty_master_ = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        must(tty_master_ >= 0 && grantpt(tty_master_) == 0 && unlockpt(tty_master_) == 0, "posix_openpt");
        tty_name = ptsname(tty_master_);
        if (on_terminal) {
            const winsize ws{setup.terminal_rows, setup.terminal_cols, 0, 0};
            must(ioctl(tty_master_, TIOCSWINSZ, &ws) == 0, "TIOCSWINSZ");
            tty_fd_ = tty_master_;
        }
    }

    started_ = std::chrono::steady_clock::now();
    pid_ = fork();
    must(pid_ >= 0, "fork");
    if (pid_ == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        dup2(err[1], 2);
        if (!setup.stdout_path.empty()) {
            const int fd = open(setup.stdout_path.c_str(), O_WRONLY | O_CLOEXEC);
            if (fd < 0 || dup2(fd, 1) != 1)
                _exit(126);
        }
        // Only 0, 1 and 2 go to the program, so fd-leak checks see its own.
        closefrom(3);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        signal(SIGPIPE, SIG_DFL);
        for (const auto& [resource, value] : setup.limits) {
            const rlimit lim{value, value};
            if (setrlimit(resource, &lim) != 0)
                _exit(126);
        }
        if (setup.controlling_tty || on_terminal) {
            // A new session's first terminal opened without O_NOCTTY becomes its controlling one.
            const int tty = setsid() < 0 ? -1 : open(tty_name.c_str(), O_RDWR | O_CLOEXEC);
            if (tty < 0 || (on_terminal && (dup2(tty, 1) != 1 || dup2(tty, 2) != 2)))
                _exit(126);
        }
        if (!setup.cgroup.empty()) {
            const int procs = open((setup.cgroup + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
            if (procs < 0 || write(procs, "0", 1) != 1)
                _exit(126);
        }
        if (setup.uid != 0 && (setgroups(0, nullptr) != 0 || setgid(setup.gid) != 0 || setuid(setup.uid) != 0))
            _exit(126);
        execve(args[0], args.data(), envp.data());
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    close(err[1]);
    if (setup.stdout_closed) {
        close(out[0]);
        out[0] = -1;
    }
    for (const auto& [stalled, fd] : {std::pair{setup.stdout_stalled, &out[0]}, std::pair{setup.stderr_stalled, &err[0]}})
        if (stalled) {
            stalled_.push_back(*fd);
            *fd = -1;
        }
    out_fd_ = out[0];
    err_fd_ = err[0];
    // Small inputs only; a larger one would need polling the write side.
    if (!stdin_text.empty())
        (void)!write(in[1], stdin_text.data(), stdin_text.size());
    close(in[1]);
}

Process::~Process()
{
    if (!reaped_ && pid_ > 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0)
        close(out_fd_);
    if (err_fd_ >= 0)
        close(err_fd_);
    if (tty_master_ >= 0)
        close(tty_master_);
    for (int fd : stalled_)
        close(fd);
}

void Process::send(int sig) const
{
    kill(pid_, sig);
}

bool Process::wait_for_handled(int sig, std::chrono::milliseconds limit) const
{
    const auto end = std::chrono::steady_clock::now() + limit;
    for (;;) {
        std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
        std::string line;
        while (std::getline(status, line))
            if (line.starts_with("SigBlk:") || line.starts_with("SigCgt:")) {
                const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
                if ((mask >> (sig - 1) & 1U) != 0)
                    return true;
            }
        if (std::chrono::steady_clock::now() >= end)
            return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

void Process::pump(int timeout_ms)
{
    pollfd fds[3] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}, {tty_fd_, POLLIN, 0}};
    const int n = poll(fds, 3, timeout_ms);
    if (n <= 0)
        return;
    char buf[65536];
    int* const fd_of[3] = {&out_fd_, &err_fd_, &tty_fd_};
    std::string* const text_of[3] = {&out_, &err_, &tty_};
    for (int i = 0; i < 3; ++i) {
        if (fds[i].revents == 0)
            continue;
        int& fd = *fd_of[i];
        const ssize_t got = read(fd, buf, sizeof buf);
        if (got > 0) {
            text_of[i]->append(buf, static_cast<std::size_t>(got));
        } else if (got == 0 || errno != EINTR) {
            // A terminal's master reads EIO once no one has the slave open:
            // its end of file. It stays open in tty_master_ until the end.
            if (fd != tty_master_)
                close(fd);
            fd = -1;
        }
    }
}

bool Process::wait_for_tty(const std::string& needle, std::chrono::milliseconds limit, std::size_t from)
{
    const auto end = std::chrono::steady_clock::now() + limit;
    while (tty_.find(needle, from) == std::string::npos) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        if (left.count() <= 0 || (out_fd_ < 0 && err_fd_ < 0 && tty_fd_ < 0))
            return false;
        pump(static_cast<int>(left.count()));
    }
    return true;
}

void Process::resize(unsigned short cols, unsigned short rows) const
{
    const winsize ws{rows, cols, 0, 0};
    must(ioctl(tty_master_, TIOCSWINSZ, &ws) == 0, "TIOCSWINSZ");
}

bool Process::wait_for_stderr(const std::string& needle, std::chrono::milliseconds limit)
{
    return wait_for(err_, needle, limit);
}

bool Process::wait_for_stdout(const std::string& needle, std::chrono::milliseconds limit)
{
    return wait_for(out_, needle, limit);
}

bool Process::wait_for(const std::string& text, const std::string& needle, std::chrono::milliseconds limit)
{
    const auto end = std::chrono::steady_clock::now() + limit;
    while (text.find(needle) == std::string::npos) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        if (left.count() <= 0 || (out_fd_ < 0 && err_fd_ < 0))
            return false;
        pump(static_cast<int>(left.count()));
    }
    return true;
}

Finished Process::wait(std::chrono::milliseconds limit)
{
    Finished f;
    const auto end = started_ + limit;
    while (out_fd_ >= 0 || err_fd_ >= 0 || tty_fd_ >= 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            f.timed_out = true;
            kill(pid_, SIGKILL);
            break;
        }
        pump(static_cast<int>(left.count()));
    }
    int status = 0;
    rusage usage{};
    wait4(pid_, &status, 0, &usage);
    reaped_ = true;
    f.max_rss_kib = usage.ru_maxrss;
    f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    if (WIFEXITED(status))
        f.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        f.signal = WTERMSIG(status);
    f.out = std::move(out_);
    f.err = std::move(err_);
    f.tty = std::move(tty_);
    return f;
}

Finished run(std::vector<std::string> argv, std::string stdin_text, std::vector<std::string> env,
             std::chrono::milliseconds limit, Setup setup)
{
    Process p(std::move(argv), std::move(stdin_text), std::move(env), std::move(setup));
    return p.wait(limit);
}

std::string pto_par()
{
    const char* p = std::getenv("PTO_PAR");
    if (p == nullptr)
        throw std::runtime_error("PTO_PAR is not set: run the tests with meson test");
    return p;
}

TempDir::TempDir()
{
    std::string tmpl = (std::filesystem::temp_directory_path() / "pto-par-test.XXXXXX").string();
    must(mkdtemp(tmpl.data()) != nullptr, "mkdtemp");
    path_ = tmpl;
}

TempDir::~TempDir()
{
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& text) const
{
    std::ofstream(file(name), std::ios::binary) << text;
    return file(name);
}

std::string TempDir::read(const std::string& name) const
{
    std::ifstream in(file(name), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string alive_or_gone(const std::string& pidfile, const std::string& alive, const std::string& gone)
{
    // Field 3 of /proc/PID/stat is the state; the pids here run sh or sleep,
    // whose names hold no blank.
    return "s=$(cut -d' ' -f3 /proc/$(cat " + pidfile + ")/stat 2>/dev/null); if [ -n \"$s\" ] && [ \"$s\" != Z ]; then echo " +
           alive + "; else echo " + gone + "; fi";
}

bool gone_within(pid_t pid, std::chrono::milliseconds limit)
{
    const auto end = std::chrono::steady_clock::now() + limit;
    while (process_alive(pid)) {
        if (std::chrono::steady_clock::now() > end)
            return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

bool cgroups_usable()
{
    static const bool usable = [] {
        const auto r = run({pto_par(), "-n", "-d", "none", "--contain", "cgroup"}, "@0 true\n");
        if (r.exit_code != 0)
            std::fprintf(stderr, "cgroup containment is not available here; its tests are skipped: %s", r.err.c_str());
        return r.exit_code == 0;
    }();
    return usable;
}

bool pseudo_terminals_usable()
{
    const int fd = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        std::fprintf(stderr, "posix_openpt: %s (no devpts on /dev/pts?): the terminal tests are skipped\n",
                     std::strerror(errno));
        return false;
    }
    const bool usable = grantpt(fd) == 0 && unlockpt(fd) == 0 && ptsname(fd) != nullptr;
    (void)close(fd);  // only opened to try
    return usable;
}

bool subreaper_usable()
{
    int was = 0;
    if (prctl(PR_GET_CHILD_SUBREAPER, &was) != 0)
        return false;
    if (was != 0)
        return true;
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        std::fprintf(stderr, "prctl(PR_SET_CHILD_SUBREAPER) fails here (qemu-user?): the tests of orphans are skipped\n");
        return false;
    }
    (void)prctl(PR_SET_CHILD_SUBREAPER, 0);
    return true;
}

TestCgroup::TestCgroup()
{
    const auto r = run({pto_par(), "-n", "-d", "none", "--contain", "cgroup"}, "@0 true\n");
    const std::string marker = "a cgroup per job under ";
    const auto at = r.out.find(marker);
    if (at == std::string::npos)
        throw std::runtime_error("pto-par -n did not say where its cgroups go: " + r.out + r.err);
    const auto end = r.out.find(')', at);
    path_ = r.out.substr(at + marker.size(), end - at - marker.size()) + "/pto-test-" + std::to_string(getpid());
    must(mkdir(path_.c_str(), 0755) == 0 || errno == EEXIST, "mkdir test cgroup");
}

TestCgroup::~TestCgroup()
{
    // Fails while something is left in it, which the test has then reported.
    rmdir(path_.c_str());
}

bool process_alive(pid_t pid)
{
    if (kill(pid, 0) != 0)
        return false;
    // A zombie is dead for our purposes; /proc tells the state.
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string all((std::istreambuf_iterator<char>(stat)), {});
    const auto paren = all.rfind(')');
    return paren == std::string::npos || paren + 2 >= all.size() || all[paren + 2] != 'Z';
}

std::vector<std::string> lines_with(const std::string& text, const std::string& needle)
{
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (line.find(needle) != std::string::npos)
            out.push_back(line);
    return out;
}

}  // namespace pto::test
