// The run's signals as readable events: read from a signalfd that sits first
// in the poll set, so a flood of job output can never starve Ctrl-C.
#pragma once

#include <signal.h>

#include <array>
#include <span>
#include <vector>

#include <pto/error.hpp>

#include "common/unique_fd.hpp"

namespace pto::runner {

class SignalChannel {
public:
    // SIGCHLD always; with `stop_signals` also SIGINT, SIGTERM, SIGHUP,
    // SIGUSR1; and every signal of `watched`; a stop signal the caller
    // ignores too. `borrowed`: a signalfd of the caller's (with the stop
    // signals) to read them from instead of a new one, a descriptor fewer
    // for the jobs; its mask then takes in these signals too, and it is
    // left open.
    static Expected<SignalChannel> open(bool stop_signals, std::span<const int> watched = {}, int borrowed = -1);

    SignalChannel(SignalChannel&&) noexcept;
    SignalChannel& operator=(SignalChannel&&) = delete;
    SignalChannel(const SignalChannel&) = delete;
    ~SignalChannel();  // restores the caller's mask and handlers

    int fd() const { return borrowed_ >= 0 ? borrowed_ : fd_.get(); }

    // Every signal that has arrived since the last call; SIGINT, SIGTERM
    // and SIGHUP in the order they came.
    Expected<std::vector<int>> drain();

private:
    static constexpr std::array<int, 3> relayed = {SIGINT, SIGTERM, SIGHUP};

    SignalChannel() = default;
    UniqueFd fd_;
    int borrowed_ = -1;
    sigset_t caller_mask_{};
    bool restore_ = false;
    std::array<struct sigaction, relayed.size()> caller_actions_{};
    std::array<bool, relayed.size()> handled_{};
};

}  // namespace pto::runner
