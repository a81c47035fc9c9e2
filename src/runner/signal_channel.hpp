// The run's signals as readable events: blocked for the whole run and read
// from a signalfd that sits first in the poll set, so a flood of job output
// can never starve Ctrl-C.
#pragma once

#include <signal.h>

#include <span>
#include <vector>

#include <pto/error.hpp>

#include "common/unique_fd.hpp"

namespace pto::runner {

class SignalChannel {
public:
    // SIGCHLD always; with `stop_signals` also SIGINT, SIGTERM, SIGHUP,
    // SIGUSR1; and every signal of `watched`.
    static Expected<SignalChannel> open(bool stop_signals, std::span<const int> watched = {});

    SignalChannel(SignalChannel&&) noexcept;
    SignalChannel& operator=(SignalChannel&&) = delete;
    SignalChannel(const SignalChannel&) = delete;
    ~SignalChannel();  // restores the caller's mask

    int fd() const { return fd_.get(); }

    // Every signal that has arrived since the last call, in order.
    Expected<std::vector<int>> drain();

private:
    SignalChannel() = default;
    UniqueFd fd_;
    sigset_t caller_mask_{};
    bool restore_ = false;
};

}  // namespace pto::runner
