// Naming the rank that overflowed its stack. While ranks run on a thread, a
// SIGSEGV handler on an alternate signal stack looks up the fault address
// among the guard regions of that thread's ranks; a hit is reported as
//     pto::mp: rank 3 overflowed its 32768-byte stack (fault at 0x7f...)
// and the process then dies of the SIGSEGV as it would have. Any other SIGSEGV
// goes to the handler installed before.
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

// Installs the handler (process-wide, shared by all threads running ranks)
// and an alternate signal stack (this thread's) for its lifetime, and makes
// `guards` the regions this thread's faults are looked up in; the previous
// handler, alternate stack and regions come back when it ends. Where either
// cannot be installed, an overflow is still a SIGSEGV, only without the name.
class OverflowReport {
public:
    explicit OverflowReport(std::span<const GuardRegion> guards) noexcept;
    OverflowReport(const OverflowReport&) = delete;
    OverflowReport& operator=(const OverflowReport&) = delete;
    ~OverflowReport();

private:
    std::span<const GuardRegion> guards_;
    const std::span<const GuardRegion>* previous_guards_ = nullptr;
    bool handler_installed_ = false;
    void* alt_stack_ = nullptr;  // mapped here, installed when not null
    std::size_t alt_stack_bytes_ = 0;
    stack_t previous_alt_stack_{};
};

}  // namespace pto::mp::detail
