#include "runner/process_group.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>

#include "runner/unique_fd.hpp"

namespace pto::runner {

bool group_exists(pid_t pgid)
{
    // EPERM means a member exists that changed its credentials: still there.
    return kill(-pgid, 0) == 0 || errno == EPERM;
}

void signal_group(pid_t pgid, int sig)
{
    // ESRCH: nothing left to signal, which is the goal. EPERM: a setuid member
    // we may not signal; group_exists() keeps reporting it and the run's
    // give-up deadline bounds the wait.
    (void)kill(-pgid, sig);
}

namespace {

// Field 5 of /proc/PID/stat; the command name (field 2) may hold spaces and
// parentheses, so parse after its last ')'.
pid_t pgrp_of(const char* pid_dir)
{
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%s/stat", pid_dir);
    UniqueFd fd(open(path, O_RDONLY | O_CLOEXEC));
    if (!fd)
        return -1;  // the process ended meanwhile
    char buf[512];
    const ssize_t n = read(fd.get(), buf, sizeof buf - 1);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char* p = std::strrchr(buf, ')');
    if (p == nullptr)
        return -1;
    int ppid = 0;
    int pgrp = -1;
    char state = 0;
    if (std::sscanf(p + 1, " %c %d %d", &state, &ppid, &pgrp) != 3)
        return -1;
    return pgrp;
}

}  // namespace

int count_group_members(pid_t pgid)
{
    DIR* dir = opendir("/proc");
    if (dir == nullptr)
        return -1;
    int count = 0;
    while (const dirent* e = readdir(dir)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        if (pgrp_of(e->d_name) == pgid)
            ++count;
    }
    closedir(dir);
    return count;
}

}  // namespace pto::runner
