// Naming the rank that overflowed its stack. While ranks run on a thread, a
// SIGSEGV handler on an alternate signal stack checks whether the running
// rank's stack pointer has left its stack, and else looks the fault address up
// among the guard regions of that thread's ranks; a hit is reported as
//     pto::mp: rank 3 overflowed its 32768-byte stack (fault at 0x7f...)
// (with ": a frame larger than its N-byte guard region jumped it" when the
// fault is below the guard) and the process then dies of the SIGSEGV as it
// would have. Any other crash signal while a rank runs gets a line naming it,
//     pto::mp: SIGABRT while rank 2 ran
// and goes on to the handler installed before.
#pragma once

#include <signal.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace pto::mp::detail {

struct GuardRegion {
    std::uintptr_t low = 0;   // the guard region, [low, high)
    std::uintptr_t high = 0;
    int rank = 0;
    std::size_t stack_bytes = 0;  // the usable stack above it
};

// Makes `guards` (indexed by rank) the regions this thread's faults are looked
// up in, for its lifetime. The handler (process-wide) is installed by the
// first of these and stays, passing faults that are not overflows on to the
// handler it replaced; the alternate signal stack is the thread's from its
// first one to its end. Where either cannot be installed, an overflow is
// still a SIGSEGV, only without the name.
class OverflowReport {
public:
    explicit OverflowReport(std::span<const GuardRegion> guards) noexcept;
    OverflowReport(const OverflowReport&) = delete;
    OverflowReport& operator=(const OverflowReport&) = delete;
    ~OverflowReport();

private:
    std::span<const GuardRegion> guards_;
    const std::span<const GuardRegion>* previous_guards_ = nullptr;
};

}  // namespace pto::mp::detail
