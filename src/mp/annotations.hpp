// What AddressSanitizer and valgrind must be told about rank stacks and the
// switches between them; each call compiles to nothing when the tool is absent.
#pragma once

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define PTO_MP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PTO_MP_ASAN 1
#endif
#endif

#if PTO_MP_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define PTO_MP_VALGRIND 1
#endif

namespace pto::mp::detail {

// ASan keeps the bounds of the stack in use; it must hear of every switch, or
// it takes frames on a rank stack for overflows of the thread's stack.
// fake_stack == nullptr on the last switch out of a context frees its state.
inline void asan_start_switch([[maybe_unused]] void** fake_stack,
                              [[maybe_unused]] const void* bottom,
                              [[maybe_unused]] std::size_t size) noexcept
{
#if PTO_MP_ASAN
    __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#endif
}

inline void asan_finish_switch([[maybe_unused]] void* fake_stack,
                               [[maybe_unused]] const void** from_bottom,
                               [[maybe_unused]] std::size_t* from_size) noexcept
{
#if PTO_MP_ASAN
    __sanitizer_finish_switch_fiber(fake_stack, from_bottom, from_size);
#endif
}

// A stack left by a rank still carries the poisoned redzones of the frames it
// never returned from; a later mapping at the same address must not inherit them.
inline void asan_unpoison([[maybe_unused]] const void* p, [[maybe_unused]] std::size_t size) noexcept
{
#if PTO_MP_ASAN
    ASAN_UNPOISON_MEMORY_REGION(p, size);
#endif
}

// Without this, valgrind takes a switch to a nearby rank stack for a huge
// stack frame and reports the memory between as uninitialised.
inline unsigned valgrind_register_stack([[maybe_unused]] const void* low,
                                        [[maybe_unused]] const void* high) noexcept
{
#if PTO_MP_VALGRIND
    return VALGRIND_STACK_REGISTER(low, high);
#else
    return 0;
#endif
}

inline void valgrind_deregister_stack([[maybe_unused]] unsigned id) noexcept
{
#if PTO_MP_VALGRIND
    VALGRIND_STACK_DEREGISTER(id);
#endif
}

}  // namespace pto::mp::detail
