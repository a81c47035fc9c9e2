// Where pto-par's standard output and error go, as far as it matters to how
// they are written.
#pragma once

#include <pto/error.hpp>

namespace pto::cli {

// Which of descriptors 0-2 pto-par was started without.
struct ClosedStreams {
    bool input = false;
    bool output = false;
    bool error = false;
};

// Puts /dev/null on each of descriptors 0-2 that is closed, before anything
// else opens a descriptor: the lowest free number would go to the next one
// opened, and the jobs' output or pto-par's notices would be written into a
// signalfd or a pipe. Says which were closed, for the caller to refuse or
// accept.
Expected<ClosedStreams> fill_closed_streams();

// Standard output shows on the terminal standard error is: what one writes
// then takes the other's progress line away.
bool same_terminal(int a, int b);

// Whether `a` and `b` write to one place: the same pipe, file or socket
// (`2>&1`, the usual CI log), or the same terminal. Written through two
// sinks, a status line would then land inside a block or a line.
bool same_destination(int a, int b);

}  // namespace pto::cli
