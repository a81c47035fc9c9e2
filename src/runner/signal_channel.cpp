#include "runner/signal_channel.hpp"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace pto::runner {

Expected<SignalChannel> SignalChannel::open(bool stop_signals, std::span<const int> watched)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    if (stop_signals)
        for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1})
            sigaddset(&set, sig);
    for (int sig : watched)
        if (sigaddset(&set, sig) != 0)
            return tl::unexpected(sys_error("watching signal " + std::to_string(sig), errno));

    SignalChannel ch;
    if (sigprocmask(SIG_BLOCK, &set, &ch.caller_mask_) != 0)
        return tl::unexpected(sys_error("sigprocmask", errno));
    ch.restore_ = true;
    ch.fd_ = UniqueFd(signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
    if (!ch.fd_)
        return tl::unexpected(sys_error("signalfd", errno));  // ~SignalChannel restores the mask
    return ch;
}

SignalChannel::SignalChannel(SignalChannel&& o) noexcept
    : fd_(std::move(o.fd_)), caller_mask_(o.caller_mask_), restore_(std::exchange(o.restore_, false))
{
}

SignalChannel::~SignalChannel()
{
    // Cannot fail with a valid set; nothing to do if it did.
    if (restore_)
        (void)sigprocmask(SIG_SETMASK, &caller_mask_, nullptr);
}

Expected<std::vector<int>> SignalChannel::drain()
{
    std::vector<int> got;
    signalfd_siginfo info[16];
    for (;;) {
        const ssize_t n = read(fd_.get(), info, sizeof info);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return got;
            return tl::unexpected(sys_error("read(signalfd)", errno));
        }
        for (ssize_t i = 0; i < n / static_cast<ssize_t>(sizeof info[0]); ++i)
            got.push_back(static_cast<int>(info[i].ssi_signo));
    }
}

}  // namespace pto::runner
