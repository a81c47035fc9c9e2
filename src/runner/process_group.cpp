#include "runner/process_group.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "common/read_file.hpp"
#include "common/unique_fd.hpp"

namespace pto::runner {

bool group_exists(pid_t pgid)
{
    // EPERM means a member exists that changed its credentials: still there.
    return kill(-pgid, 0) == 0 || errno == EPERM;
}

void signal_group(pid_t pgid, int sig)
{
    // ESRCH: nothing left to signal, which is the goal. EPERM: a setuid member
    // we may not signal; group_exists() keeps reporting it, and once the wait
    // after SIGKILL ends the job's devices are withheld.
    (void)kill(-pgid, sig);
}

namespace {

// What /proc/PID/stat says of a process (fields 2 to 5).
struct ProcStat {
    std::string comm;
    char state = 0;
    pid_t ppid = -1;
    pid_t pgrp = -1;
};

// Nothing when the process ended meanwhile or /proc cannot tell. The
// command name may hold spaces and parentheses: it ends at the last ')'.
std::optional<ProcStat> proc_stat(const char* pid_dir)
{
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%s/stat", pid_dir);
    UniqueFd fd(open(path, O_RDONLY | O_CLOEXEC));
    if (!fd)
        return std::nullopt;
    char buf[512];
    const ssize_t n = read(fd.get(), buf, sizeof buf - 1);
    if (n <= 0)
        return std::nullopt;
    buf[n] = '\0';
    const char* open_paren = std::strchr(buf, '(');
    const char* close_paren = std::strrchr(buf, ')');
    if (open_paren == nullptr || close_paren == nullptr || close_paren < open_paren)
        return std::nullopt;
    ProcStat st;
    st.comm.assign(open_paren + 1, close_paren);
    int ppid = 0;
    int pgrp = -1;
    if (std::sscanf(close_paren + 1, " %c %d %d", &st.state, &ppid, &pgrp) != 3)
        return std::nullopt;
    st.ppid = ppid;
    st.pgrp = pgrp;
    return st;
}

// Calls fn(pid, stat) for every process in /proc; false if /proc cannot be read.
template <class Fn>
bool for_each_process(Fn fn)
{
    DIR* dir = opendir("/proc");
    if (dir == nullptr)
        return false;
    while (const dirent* e = readdir(dir)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        if (const auto st = proc_stat(e->d_name))
            fn(static_cast<pid_t>(std::atoi(e->d_name)), *st);
    }
    closedir(dir);
    return true;
}

}  // namespace

int count_group_members(pid_t pgid)
{
    int count = 0;
    const bool ok = for_each_process([&](pid_t, const ProcStat& ids) {
        if (ids.pgrp == pgid)
            ++count;
    });
    return ok ? count : -1;
}

std::vector<pid_t> group_members(pid_t pgid)
{
    std::vector<pid_t> pids;
    for_each_process([&](pid_t pid, const ProcStat& ids) {
        if (ids.pgrp == pgid)
            pids.push_back(pid);
    });
    return pids;
}

std::vector<pid_t> children_of_this_process()
{
    const pid_t self = getpid();
    // One small file per thread (CONFIG_PROC_CHILDREN) is far cheaper than
    // reading every process's stat; this process has one thread.
    const std::string path = "/proc/self/task/" + std::to_string(self) + "/children";
    if (auto text = read_file(path, 1 << 20, path))
        return parse_pids(*text);
    std::vector<pid_t> kids;
    for_each_process([&](pid_t pid, const ProcStat& ids) {
        if (ids.ppid == self)
            kids.push_back(pid);
    });
    return kids;
}

std::vector<pid_t> descendants_of_this_process()
{
    std::vector<std::pair<pid_t, ProcStat>> all;
    for_each_process([&](pid_t pid, const ProcStat& st) { all.emplace_back(pid, st); });
    std::vector<pid_t> out;
    std::vector<pid_t> parents{getpid()};
    while (!parents.empty()) {
        const pid_t parent = parents.back();
        parents.pop_back();
        for (const auto& [pid, st] : all)
            if (st.ppid == parent) {
                parents.push_back(pid);  // a zombie's children are already re-parented: harmless
                if (st.state != 'Z')
                    out.push_back(pid);
            }
    }
    return out;
}

std::vector<pid_t> parse_pids(std::string_view text)
{
    std::vector<pid_t> pids;
    const std::string copy(text);  // strtol wants the NUL that a view lacks
    for (const char* p = copy.c_str(); *p != '\0';) {
        char* end = nullptr;
        const long pid = std::strtol(p, &end, 10);
        if (end == p)
            break;
        // 0: a process of another PID namespace (cgroup.procs shows it so),
        // which kill(0, sig) would take for our own process group.
        if (pid > 0)
            pids.push_back(static_cast<pid_t>(pid));
        p = end;
    }
    return pids;
}

std::string describe_processes(const std::vector<pid_t>& pids)
{
    std::string out;
    for (pid_t pid : pids) {
        if (!out.empty())
            out += ", ";
        out += "pid " + std::to_string(pid);
        if (const auto st = proc_stat(std::to_string(pid).c_str()))
            out += " (" + st->comm + ", state " + st->state + ")";
    }
    return out;
}

std::vector<std::optional<int>> reap_all_within(std::span<const pid_t> pids, int ms)
{
    std::vector<std::optional<int>> status(pids.size());
    std::vector<bool> done(pids.size(), false);
    const auto try_reap = [&](std::size_t i) {
        int st = 0;
        const pid_t r = waitpid(pids[i], &st, WNOHANG);
        if (r == pids[i] || (r < 0 && errno == ECHILD)) {
            status[i] = r == pids[i] ? st : 0;
            done[i] = true;
        }
    };
    // Where the kernel has pidfds (5.3), one poll over all of them; else a
    // look every 10 ms.
    std::vector<UniqueFd> pidfds;
    for (pid_t pid : pids)
        pidfds.emplace_back(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
        std::vector<pollfd> fds;
        std::size_t running = 0;
        for (std::size_t i = 0; i < pids.size(); ++i) {
            if (done[i])
                continue;
            try_reap(i);
            if (done[i])
                continue;
            ++running;
            if (pidfds[i])
                fds.push_back({pidfds[i].get(), POLLIN, 0});
        }
        const auto left =
            std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (running == 0 || left <= 0)
            return status;
        // Without a pidfd for every one, the poll is also the 10 ms look.
        const int timeout = static_cast<int>(fds.size() == running ? left : std::min<long long>(left, 10));
        (void)poll(fds.data(), fds.size(), timeout);  // a timeout or EINTR: looked at again above
    }
}

}  // namespace pto::runner
