// The fast context switch for x86-64 System V: it saves only what the ABI makes
// callee-saved (rbx, rbp, r12-r15, the MXCSR and x87 control words) on the
// suspended stack and needs no system call, where swapcontext(3) also saves the
// signal mask with one.
#pragma once

#if defined(__x86_64__) && defined(__ELF__)
#define PTO_MP_HAVE_ASM_SWITCH 1

#include <cstddef>
#include <span>

namespace pto::mp::detail {

// Saves the running context's registers on its stack, stores that stack
// pointer in *save_sp, and resumes the context whose stack pointer is load_sp.
extern "C" void pto_mp_switch_x86_64(void** save_sp, void* load_sp) noexcept;

// Lays out `stack` so that switching to the returned stack pointer calls
// enter(arg) with a 16-byte aligned stack and an end-of-chain frame.
void* prepare_x86_64_stack(std::span<std::byte> stack, void (*enter)(void*), void* arg) noexcept;

}  // namespace pto::mp::detail

#endif
