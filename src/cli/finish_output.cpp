#include "cli/finish_output.hpp"

#include <iostream>
#include <span>

namespace pto::cli {
namespace {

// For the waits on the readers at the end: reads the pending signals and
// returns the stop signal that decides the exit status when one more came
// (the first of the run's: signals.stop_signal()), else 0.
int new_stop_signal(EarlySignals& signals)
{
    const int seen = signals.stops_taken();
    // A signalfd that cannot be read is no reason to stop waiting.
    if (!signals.take())
        return 0;
    return signals.stops_taken() != seen ? signals.stop_signal() : 0;
}

}  // namespace

int stop_signal_now(EarlySignals& signals, const std::string& doing)
{
    auto requests = signals.take();
    if (!requests) {
        std::cerr << "pto-par: warning: " << requests.error().message << "\n";
        return 0;
    }
    if (*requests > 0)
        std::cerr << "[pto-par] " << doing << "\n";
    return signals.stop_signal();
}

int finish_output(output::Sink& out, output::Sink& err, EarlySignals& signals, bool must_end, int status)
{
    output::Sink* const both[] = {&out, &err};
    // One sink when standard output and error are one place.
    const std::span<output::Sink* const> sinks(both, &out == &err ? 1 : 2);
    if (!must_end) {
        auto drained = output::drain(sinks, signals.fd(), [&signals] { return new_stop_signal(signals); });
        if (!drained)
            err.write("pto-par: error: " + drained.error().message + "\n");
        else if (*drained != 0)
            status = 128 + *drained;
    }
    for (auto* s : sinks)
        s->flush();
    if (out.pending() != 0)
        err.write("[pto-par] " + std::to_string(out.pending()) +
                  " bytes of job output could not be written: standard output is not being read\n");
    else if (out.reader_gone() && out.dropped() != 0)
        err.write("[pto-par] standard output was closed; " + std::to_string(out.dropped()) +
                  " bytes of job output were not written\n");
    for (auto* s : sinks)
        if (s->error()) {
            err.write("pto-par: error: " + s->error()->message + "\n");
            if (status < 2)  // 124 and 128+N say more about how the run ended
                status = 1;
        }
    err.flush();
    if (must_end && err.pending() != 0) {
        // pto-par's own last lines (a TIMEOUT dump, the count above) to a
        // reader that is slow, not stopped: a second at most, and a stop
        // signal ends that wait too.
        output::Sink* const own[] = {&err};
        // What is left is lost either way: nothing more to say.
        (void)output::drain(own, signals.fd(), [&signals] { return new_stop_signal(signals); }, 1000);
    }
    return status;
}

}  // namespace pto::cli
