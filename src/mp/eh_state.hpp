// The C++ runtime keeps, per thread, the chain of exceptions being handled (what
// `throw;` rethrows) and the count behind std::uncaught_exceptions(). Ranks
// share the thread, so without a swap on each switch a rank suspended in a
// catch block would rethrow another rank's exception, and a rank unwinding
// through a yielding destructor would make every other rank look unwound.
#pragma once

#include <cxxabi.h>

namespace pto::mp::detail {

// Mirrors __cxa_eh_globals as both libsupc++ and libc++abi lay it out.
struct EhState {
    void* caught_exceptions = nullptr;
    unsigned int uncaught_exceptions = 0;
#if defined(__ARM_EABI_UNWINDER__)
    void* propagating_exceptions = nullptr;
#endif
};

inline EhState& thread_eh_state() noexcept
{
    return *reinterpret_cast<EhState*>(abi::__cxa_get_globals());
}

}  // namespace pto::mp::detail
