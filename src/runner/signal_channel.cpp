#include "runner/signal_channel.hpp"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

namespace pto::runner {

namespace {

// The kernel hands out pending standard signals lowest number first, not in
// the order they came: SIGTERM then SIGINT, both pending, read as SIGINT
// first, and the run would exit 130 where the first signal asked for 143.
// So the stop signals are caught as they come, by a handler that passes
// each on as a real-time signal carrying its number (real-time signals of
// one number queue in order), which the signalfd reads.
int relay_signal()
{
    return SIGRTMIN;
}

// A stop signal that could not be queued (the caller's RLIMIT_SIGPENDING is
// spent): kept here, read at the next drain.
volatile sig_atomic_t unqueued[NSIG] = {};

void relay(int sig)
{
    const int saved = errno;
    sigval value{};
    value.sival_int = sig;
    if (sigqueue(getpid(), relay_signal(), value) != 0)
        unqueued[sig] = 1;
    errno = saved;
}

}  // namespace

Expected<SignalChannel> SignalChannel::open(bool stop_signals, std::span<const int> watched, int borrowed)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    if (stop_signals) {
        sigaddset(&set, SIGUSR1);
        sigaddset(&set, relay_signal());
    }
    for (int sig : watched)
        if (sigaddset(&set, sig) != 0)
            return tl::unexpected(sys_error("watching signal " + std::to_string(sig), errno));

    SignalChannel ch;
    if (sigprocmask(SIG_BLOCK, &set, &ch.caller_mask_) != 0)
        return tl::unexpected(sys_error("sigprocmask", errno));
    ch.restore_ = true;
    if (borrowed >= 0) {
        // The mask is replaced, not added to: the stop signals the owner's
        // descriptor must hold (libptopar(3)) go back in, for after the
        // run. Meanwhile the relay catches them, so they are never pending
        // for it; and what this channel adds is unblocked again when it
        // ends, so never pending for the owner.
        sigset_t mask = set;
        for (int sig : relayed)
            sigaddset(&mask, sig);
        if (signalfd(borrowed, &mask, 0) < 0)
            return tl::unexpected(sys_error("signalfd", errno));  // ~SignalChannel restores the mask
        ch.borrowed_ = borrowed;
    } else {
        ch.fd_ = UniqueFd(signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
        if (!ch.fd_)
            return tl::unexpected(sys_error("signalfd", errno));  // ~SignalChannel restores the mask
    }
    if (!stop_signals)
        return ch;

    struct sigaction act {};
    act.sa_handler = relay;
    // Restarted, so that a signal never fails a write of the reports; one
    // handler at a time.
    act.sa_flags = SA_RESTART;
    sigemptyset(&act.sa_mask);
    for (int sig : relayed)
        sigaddset(&act.sa_mask, sig);
    sigset_t stops;
    sigemptyset(&stops);
    for (std::size_t i = 0; i < relayed.size(); ++i) {
        // Caught even when whoever started pto-par ignored it (a shell's
        // background job ignores SIGINT): blocked for a signalfd, as they
        // were before, such a signal stopped the run all the same.
        if (sigaction(relayed[i], &act, &ch.caller_actions_[i]) != 0)
            return tl::unexpected(sys_error("sigaction", errno));
        ch.handled_[i] = true;
        sigaddset(&stops, relayed[i]);
    }
    // A caller that blocked them would otherwise hold them from the handler.
    if (sigprocmask(SIG_UNBLOCK, &stops, nullptr) != 0)
        return tl::unexpected(sys_error("sigprocmask", errno));
    return ch;
}

SignalChannel::SignalChannel(SignalChannel&& o) noexcept
    : fd_(std::move(o.fd_)), borrowed_(std::exchange(o.borrowed_, -1)), caller_mask_(o.caller_mask_), restore_(std::exchange(o.restore_, false)),
      caller_actions_(o.caller_actions_), handled_(std::exchange(o.handled_, {}))
{
}

SignalChannel::~SignalChannel()
{
    // Neither can fail with valid arguments; nothing to do if they did.
    for (std::size_t i = 0; i < relayed.size(); ++i)
        if (handled_[i])
            (void)sigaction(relayed[i], &caller_actions_[i], nullptr);
    if (restore_)
        (void)sigprocmask(SIG_SETMASK, &caller_mask_, nullptr);
}

Expected<std::vector<int>> SignalChannel::drain()
{
    std::vector<int> got;
    signalfd_siginfo info[16];
    for (;;) {
        const ssize_t n = read(fd(), info, sizeof info);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                return tl::unexpected(sys_error("read(signalfd)", errno));
            for (int sig : relayed)
                if (unqueued[sig] != 0) {
                    unqueued[sig] = 0;
                    got.push_back(sig);
                }
            return got;
        }
        for (ssize_t i = 0; i < n / static_cast<ssize_t>(sizeof info[0]); ++i) {
            const auto& one = info[i];
            if (static_cast<int>(one.ssi_signo) != relay_signal()) {
                got.push_back(static_cast<int>(one.ssi_signo));
                continue;
            }
            // The same number sent by another process says nothing: dropped.
            if (one.ssi_code == SI_QUEUE && one.ssi_pid == static_cast<std::uint32_t>(getpid()))
                got.push_back(one.ssi_int);
        }
    }
}

}  // namespace pto::runner
