// Where pto-par's standard output and error go, as far as it matters to how
// they are written.
#pragma once

#include <pto/error.hpp>

namespace pto::cli {

// Puts /dev/null on each of descriptors 0-2 that is closed, before anything
// else opens a descriptor: the lowest free number would go to the next one
// opened, and the jobs' output or pto-par's notices would be written into a
// signalfd or a pipe. Says whether standard output was one of them, which
// the caller refuses (a closed input or error only reads or discards).
Expected<bool> fill_closed_streams();

// Standard output shows on the terminal standard error is: what one writes
// then takes the other's progress line away.
bool same_terminal(int a, int b);

// Whether `a` and `b` write to one place: the same pipe, file or socket
// (`2>&1`, the usual CI log), or the same terminal. Written through two
// sinks, a status line would then land inside a block or a line.
bool same_destination(int a, int b);

}  // namespace pto::cli
