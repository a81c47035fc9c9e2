// pto-par's signals from the first line of main to the last byte of the
// reports: blocked and read from a signalfd, so that none of them can kill
// the process half-way (SIGUSR1's default action) or be lost while the
// commands file is read, or while the reports are written after run_jobs,
// which reads its own channel only while it runs.
#pragma once

#include <pto/error.hpp>

#include "runner/signal_channel.hpp"

namespace pto::cli {

class EarlySignals {
public:
    static Expected<EarlySignals> open();

    // Readable when a signal is pending: for a poll that must also watch
    // for signals (reading the input, draining output at the end).
    int fd() const { return channel_.fd(); }

    // Reads every pending signal. Returns how many SIGUSR1 (status
    // requests) there were; a stop signal is kept for stop_signal().
    Expected<int> take();

    // The first SIGINT, SIGTERM or SIGHUP taken so far, 0 if none. Sticky,
    // so that whichever poll loop read it, the exit status still says so.
    int stop_signal() const { return stop_signal_; }
    // How many stop signals were taken so far.
    int stops_taken() const { return stops_taken_; }

private:
    explicit EarlySignals(runner::SignalChannel channel) : channel_(std::move(channel)) {}

    runner::SignalChannel channel_;
    int stop_signal_ = 0;
    int stops_taken_ = 0;
};

}  // namespace pto::cli
