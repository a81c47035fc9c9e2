#include "runner/process_group.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <string>

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

struct StatIds {
    pid_t ppid = -1;
    pid_t pgrp = -1;
};

// Fields 4 and 5 of /proc/PID/stat; the command name (field 2) may hold
// spaces and parentheses, so parse after its last ')'.
StatIds stat_ids(const char* pid_dir)
{
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%s/stat", pid_dir);
    UniqueFd fd(open(path, O_RDONLY | O_CLOEXEC));
    if (!fd)
        return {};  // the process ended meanwhile
    char buf[512];
    const ssize_t n = read(fd.get(), buf, sizeof buf - 1);
    if (n <= 0)
        return {};
    buf[n] = '\0';
    const char* p = std::strrchr(buf, ')');
    if (p == nullptr)
        return {};
    int ppid = 0;
    int pgrp = -1;
    char state = 0;
    if (std::sscanf(p + 1, " %c %d %d", &state, &ppid, &pgrp) != 3)
        return {};
    return {ppid, pgrp};
}

// Calls fn(pid, ids) for every process in /proc; false if /proc cannot be read.
template <class Fn>
bool for_each_process(Fn fn)
{
    DIR* dir = opendir("/proc");
    if (dir == nullptr)
        return false;
    while (const dirent* e = readdir(dir)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        fn(static_cast<pid_t>(std::atoi(e->d_name)), stat_ids(e->d_name));
    }
    closedir(dir);
    return true;
}

}  // namespace

int count_group_members(pid_t pgid)
{
    int count = 0;
    const bool ok = for_each_process([&](pid_t, StatIds ids) {
        if (ids.pgrp == pgid)
            ++count;
    });
    return ok ? count : -1;
}

std::vector<pid_t> group_members(pid_t pgid)
{
    std::vector<pid_t> pids;
    for_each_process([&](pid_t pid, StatIds ids) {
        if (ids.pgrp == pgid)
            pids.push_back(pid);
    });
    return pids;
}

std::vector<pid_t> children_of_this_process()
{
    std::vector<pid_t> kids;
    const pid_t self = getpid();
    // One small file per thread (CONFIG_PROC_CHILDREN) is far cheaper than
    // reading every process's stat; this process has one thread.
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/task/%d/children", static_cast<int>(self));
    UniqueFd fd(open(path, O_RDONLY | O_CLOEXEC));
    if (fd) {
        std::string text;
        char buf[4096];
        ssize_t n = 0;
        while ((n = read(fd.get(), buf, sizeof buf)) > 0)
            text.append(buf, static_cast<std::size_t>(n));
        if (n == 0) {
            for (const char* p = text.c_str(); *p != '\0';) {
                char* end = nullptr;
                const long pid = std::strtol(p, &end, 10);
                if (end == p)
                    break;
                kids.push_back(static_cast<pid_t>(pid));
                p = end;
            }
            return kids;
        }
    }
    for_each_process([&](pid_t pid, StatIds ids) {
        if (ids.ppid == self)
            kids.push_back(pid);
    });
    return kids;
}

}  // namespace pto::runner
