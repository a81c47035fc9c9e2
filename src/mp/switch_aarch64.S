/* The AAPCS64 context switch; see switch.hpp.

   Frame of a suspended context, 176 bytes from its saved stack pointer up:
     0  x19 ... x28
    80  x29 (frame pointer), x30 (return address)
    96  d8 ... d15
   160  FPCR (rounding mode, exception traps), FPSR (sticky exception flags)
   AAPCS64 makes x19-x29, sp and d8-d15 callee-saved and FPCR's control
   bits preserved across calls. FPSR is kept as well so that each context
   has its own exception flags, as the MXCSR gives each on x86-64.

   Return addresses are not signed here: the C++ callers sign and check
   their own against their own stack pointer, which a switch restores. With
   -mbranch-protection the entry point gets a BTI landing pad and the object
   says so; the start stub is reached by `ret`, which BTI does not check. */

#if defined(__aarch64__) && defined(__ELF__)

#include "common/gnu_property.h"

#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
#define LANDING_PAD bti c
#define BTI_FEATURE 1 /* GNU_PROPERTY_AARCH64_FEATURE_1_BTI */
#else
#define LANDING_PAD
#define BTI_FEATURE 0
#endif
#if defined(__ARM_FEATURE_PAC_DEFAULT) && __ARM_FEATURE_PAC_DEFAULT
#define PAC_FEATURE 2 /* GNU_PROPERTY_AARCH64_FEATURE_1_PAC */
#else
#define PAC_FEATURE 0
#endif
#define AARCH64_FEATURES (BTI_FEATURE | PAC_FEATURE)

    .text
    .p2align 4
    .globl pto_mp_switch
    .hidden pto_mp_switch
    .type pto_mp_switch, %function
pto_mp_switch:
    .cfi_startproc
    LANDING_PAD
    sub sp, sp, #176
    .cfi_adjust_cfa_offset 176
    stp x19, x20, [sp, #0]
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp x29, x30, [sp, #80]
    stp d8, d9, [sp, #96]
    stp d10, d11, [sp, #112]
    stp d12, d13, [sp, #128]
    stp d14, d15, [sp, #144]
    mrs x9, fpcr
    mrs x10, fpsr
    stp x9, x10, [sp, #160]
    mov x9, sp
    str x9, [x0]
    mov sp, x1
    ldp x9, x10, [sp, #160]
    msr fpcr, x9
    msr fpsr, x10
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    ldp d8, d9, [sp, #96]
    ldp d10, d11, [sp, #112]
    ldp d12, d13, [sp, #128]
    ldp d14, d15, [sp, #144]
    add sp, sp, #176
    .cfi_adjust_cfa_offset -176
    ret
    .cfi_endproc
    .size pto_mp_switch, .-pto_mp_switch

/* Where a fresh context's first switch returns to: calls x20(x19), which
   never returns. The undefined return address ends unwinders' walks. */
    .p2align 4
    .globl pto_mp_start
    .hidden pto_mp_start
    .type pto_mp_start, %function
pto_mp_start:
    .cfi_startproc
    .cfi_undefined x30
    mov x0, x19
    blr x20
    brk #0
    .cfi_endproc
    .size pto_mp_start, .-pto_mp_start

#if AARCH64_FEATURES
    GNU_PROPERTY_NOTE(GNU_PROPERTY_AARCH64_FEATURE_1_AND, AARCH64_FEATURES)
#endif

#endif

    .section .note.GNU-stack, "", %progbits
