/* The x86-64 System V context switch; see switch.hpp.

   Frame of a suspended context, from its saved stack pointer up:
     0  MXCSR (4 bytes), x87 control word (2 bytes), x87 status word (2 bytes)
     8  r15, r14, r13, r12, rbx, rbp
    56  return address
   The MXCSR carries the rounding mode and the sticky exception flags of
   SSE; the x87 control word its own, and the status word's low byte the
   x87 exception flags, which go with each context too. Those flags are
   the same on both sides of nearly every switch (none raised): only where
   they differ is the status word rewritten, out of line.

   No shadow stack is switched: a `ret` onto another context's stack would
   fault under CET SHSTK. So this object claims IBT (its one entry point
   reached by an indirect branch has endbr64) but never SHSTK, which keeps
   the linked program from being started with shadow stacks; where they are
   on anyway, the library detects it and uses ucontext (context.cpp). */

#if defined(__x86_64__) && defined(__ELF__)

#include "common/gnu_property.h"

#if defined(__CET__) && (__CET__ & 1)
#define LANDING_PAD endbr64
#define X86_FEATURES 1 /* GNU_PROPERTY_X86_FEATURE_1_IBT */
#else
#define LANDING_PAD
#define X86_FEATURES 0
#endif

    .text
    .p2align 4
    .globl pto_mp_switch
    .hidden pto_mp_switch
    .type pto_mp_switch, @function
pto_mp_switch:
    .cfi_startproc
    LANDING_PAD
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
    fnstsw 6(%rsp)
    movzbl 6(%rsp), %edx
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    movzbl 6(%rsp), %eax
    cmpl %eax, %edx
    jne .Lx87_flags
.Lx87_flags_done:
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret

/* The resumed context's x87 exception flags (in %al) differ from the ones
   left: none to raise is fnclex; otherwise the environment is stored below
   the stack pointer (the red zone: no call intervenes), its status byte
   replaced, and loaded back. The control word is loaded after this. */
.Lx87_flags:
    testl %eax, %eax
    jnz 1f
    fnclex
    jmp .Lx87_flags_done
1:
    fnstenv -32(%rsp)
    movb %al, -28(%rsp)
    fldenv -32(%rsp)
    jmp .Lx87_flags_done
    .cfi_endproc
    .size pto_mp_switch, .-pto_mp_switch

/* Where a fresh context's first switch returns to: calls r13(r12), which
   never returns. Reached by `ret`, never by an indirect branch, so it needs
   no landing pad. The undefined return address ends unwinders' walks. */
    .p2align 4
    .globl pto_mp_start
    .hidden pto_mp_start
    .type pto_mp_start, @function
pto_mp_start:
    .cfi_startproc
    .cfi_undefined rip
    movq %r12, %rdi
    callq *%r13
    ud2
    .cfi_endproc
    .size pto_mp_start, .-pto_mp_start

#if X86_FEATURES
    GNU_PROPERTY_NOTE(GNU_PROPERTY_X86_FEATURE_1_AND, X86_FEATURES)
#endif

#endif

    .section .note.GNU-stack, "", %progbits
