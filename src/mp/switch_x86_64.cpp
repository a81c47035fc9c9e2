#include "mp/switch_x86_64.hpp"

#if PTO_MP_HAVE_ASM_SWITCH

#include <cstdint>

// pto_mp_start_x86_64 is where a fresh context's first switch "returns" to: it
// passes r12 to the function in r13, which never returns. Its CFI marks the end
// of the call chain for unwinders and debuggers.
asm(R"(
    .text
    .p2align 4
    .globl pto_mp_switch_x86_64
    .hidden pto_mp_switch_x86_64
    .type pto_mp_switch_x86_64, @function
pto_mp_switch_x86_64:
    .cfi_startproc
    pushq %rbp
    .cfi_adjust_cfa_offset 8
    pushq %rbx
    .cfi_adjust_cfa_offset 8
    pushq %r12
    .cfi_adjust_cfa_offset 8
    pushq %r13
    .cfi_adjust_cfa_offset 8
    pushq %r14
    .cfi_adjust_cfa_offset 8
    pushq %r15
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .cfi_endproc
    .size pto_mp_switch_x86_64, .-pto_mp_switch_x86_64

    .p2align 4
    .globl pto_mp_start_x86_64
    .hidden pto_mp_start_x86_64
    .type pto_mp_start_x86_64, @function
pto_mp_start_x86_64:
    .cfi_startproc
    .cfi_undefined rip
    movq %r12, %rdi
    callq *%r13
    ud2
    .cfi_endproc
    .size pto_mp_start_x86_64, .-pto_mp_start_x86_64
)");

extern "C" void pto_mp_start_x86_64() noexcept;

namespace pto::mp::detail {

void* prepare_x86_64_stack(std::span<std::byte> stack, void (*enter)(void*), void* arg) noexcept
{
    const auto top = reinterpret_cast<std::uintptr_t>(stack.data() + stack.size()) & ~std::uintptr_t{15};
    auto* slot = reinterpret_cast<std::uint64_t*>(top);
    // Two empty words: after the switch's `ret` pops the start address the stack
    // pointer is 16-byte aligned again, as the `call` in the start stub needs.
    *--slot = 0;
    *--slot = 0;
    *--slot = reinterpret_cast<std::uint64_t>(&pto_mp_start_x86_64);
    *--slot = 0;  // rbp: a null frame pointer ends frame-pointer walks here
    *--slot = 0;  // rbx
    *--slot = reinterpret_cast<std::uint64_t>(arg);    // r12
    *--slot = reinterpret_cast<std::uint64_t>(enter);  // r13
    *--slot = 0;  // r14
    *--slot = 0;  // r15
    // A new context starts with the creating thread's rounding and exception masks.
    std::uint32_t mxcsr = 0;
    std::uint16_t fpu_control = 0;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpu_control));
    *--slot = mxcsr | std::uint64_t{fpu_control} << 32;
    return slot;
}

}  // namespace pto::mp::detail

#endif
