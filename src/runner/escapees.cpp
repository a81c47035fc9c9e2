#include "runner/escapees.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "runner/process_group.hpp"

namespace pto::runner {
namespace {

bool contains(const std::vector<pid_t>& pids, pid_t pid)
{
    return std::find(pids.begin(), pids.end(), pid) != pids.end();
}

void signal_all(const std::vector<pid_t>& targets, int sig)
{
    for (pid_t pid : targets) {
        // An escapee that made its own group takes its group with it.
        if (getpgid(pid) == pid)
            signal_group(pid, sig);
        else
            (void)kill(pid, sig);  // ESRCH: already gone
        if (sig == SIGTERM)
            (void)kill(pid, SIGCONT);  // ESRCH: already gone
    }
}

}  // namespace

Escapees::Escapees() : before_(children_of_this_process()) {}

std::vector<pid_t> Escapees::find(const std::vector<pid_t>& keep) const
{
    auto pids = children_of_this_process();
    std::erase_if(pids, [&](pid_t pid) { return contains(before_, pid) || contains(keep, pid); });
    return pids;
}

void Escapees::wait_gone(Clock::time_point deadline, const std::vector<pid_t>& keep, const Wait& wait) const
{
    while (!find(keep).empty() && Clock::now() < deadline)
        if (!wait(deadline))
            return;
}

void Escapees::stop(std::vector<pid_t> pids, const std::vector<pid_t>& keep, bool force, Clock::duration grace,
                    Clock::duration wait_after_kill, const Wait& wait) const
{
    signal_all(pids, force ? SIGKILL : SIGTERM);
    wait_gone(Clock::now() + (force ? Clock::duration::zero() : grace), keep, wait);
    pids = find(keep);
    if (pids.empty())
        return;
    signal_all(pids, SIGKILL);
    wait_gone(Clock::now() + wait_after_kill, keep, wait);
}

std::string escapee_notice(const std::vector<pid_t>& pids)
{
    std::string list;
    for (pid_t pid : pids) {
        if (!list.empty())
            list += ' ';
        list += std::to_string(pid);
    }
    return "stopping " + std::to_string(pids.size()) + " process" + (pids.size() == 1 ? "" : "es") +
           " that left their job's process group: pid " + list;
}

}  // namespace pto::runner
