// The hand-written context switches (switch_x86_64.S, switch_aarch64.S). Each
// saves only what its ABI makes callee-saved, with the floating-point control
// state, on the suspended stack, and makes no system call, where swapcontext(3)
// also saves the signal mask with one. Meson builds the one for the host CPU
// and defines PTO_MP_ASM_SWITCH; elsewhere only ucontext exists.
#pragma once

#if PTO_MP_ASM_SWITCH

#include <cstddef>
#include <span>

namespace pto::mp::detail {

// Saves the running context's registers on its stack, stores that stack
// pointer in *save_sp, and resumes the context whose stack pointer is load_sp.
extern "C" void pto_mp_switch(void** save_sp, void* load_sp) noexcept;

// Lays out `stack` so that switching to the returned stack pointer calls
// enter(arg) on an aligned stack, below a frame that ends the call chain.
void* prepare_asm_stack(std::span<std::byte> stack, void (*enter)(void*), void* arg) noexcept;

}  // namespace pto::mp::detail

#endif
