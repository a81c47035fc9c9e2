// The hand-written switch as a context backend: a suspended context is the
// stack pointer its registers were saved below (switch.hpp).
#pragma once

#if PTO_MP_ASM_SWITCH

#include "mp/switch.hpp"

#include <cstddef>
#include <span>

namespace pto::mp::detail {

class AsmSwitch {
public:
    // The thread's own stack needs nothing: its first switch away saves it.
    void adopt_thread() noexcept {}

    void prepare(std::span<std::byte> stack, void (*enter)(void*), void* arg) noexcept
    {
        sp_ = prepare_asm_stack(stack, enter, arg);
    }

    void jump(AsmSwitch& to) noexcept { pto_mp_switch(&sp_, to.sp_); }

private:
    void* sp_ = nullptr;
};

}  // namespace pto::mp::detail

#endif
