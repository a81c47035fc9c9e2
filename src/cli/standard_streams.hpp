// Where pto-par's standard output and error go, as far as it matters to how
// they are written.
#pragma once

namespace pto::cli {

// Standard output shows on the terminal standard error is: what one writes
// then takes the other's progress line away.
bool same_terminal(int a, int b);

// Whether `a` and `b` write to one place: the same pipe, file or socket
// (`2>&1`, the usual CI log), or the same terminal. Written through two
// sinks, a status line would then land inside a block or a line.
bool same_destination(int a, int b);

}  // namespace pto::cli
