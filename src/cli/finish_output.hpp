// The end of a run at pto-par's edge: the readers of standard output and
// error, and the stop signals that came meanwhile.
#pragma once

#include <string>

#include "cli/early_signals.hpp"
#include "output/sink.hpp"

namespace pto::cli {

// A stop signal taken now (SIGINT, SIGTERM, SIGHUP), 0 if none; SIGUSR1
// is answered with `doing`, what pto-par is busy with.
int stop_signal_now(EarlySignals& signals, const std::string& doing);

// After the run and its reports: at a normal end, waits for the readers of
// standard output and error as any filter does, until a stop signal; when
// the run must end (its time limit, a signal) it does not wait, and says
// how much job output could not be written. Returns the exit status.
int finish_output(output::Sink& out, output::Sink& err, EarlySignals& signals, bool must_end, int status);

}  // namespace pto::cli
