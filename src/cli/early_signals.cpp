#include "cli/early_signals.hpp"

#include <signal.h>

namespace pto::cli {

Expected<EarlySignals> EarlySignals::open()
{
    auto channel = runner::SignalChannel::open(true);
    if (!channel)
        return tl::unexpected(channel.error());
    return EarlySignals(std::move(*channel));
}

Expected<int> EarlySignals::take()
{
    auto got = channel_.drain();
    if (!got)
        return tl::unexpected(got.error());
    int status_requests = 0;
    for (const int sig : *got) {
        if (sig == SIGUSR1)
            ++status_requests;
        else if ((sig == SIGINT || sig == SIGTERM || sig == SIGHUP) && ++stops_taken_ == 1)
            stop_signal_ = sig;
        // SIGCHLD: a child of run_jobs reaped by then, or one pto-par was
        // started with; either way nothing to do here. Nor for what the run
        // watched on this descriptor (SIGWINCH, SIGCONT).
    }
    return status_requests;
}

}  // namespace pto::cli
