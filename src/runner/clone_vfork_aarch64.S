/* clone3 as vfork does it, for a child born in a cgroup; see launcher.cpp
   and clone_vfork_x86_64.S, whose contract this is:

   long pto_clone3_vfork(struct clone_args* args, size_t size,
                         void (*fn)(const void*), const void* arg)

   The child runs on the stack in args, calls fn(arg), which never returns,
   and never returns from here; the parent returns the child's pid or
   -errno. Return addresses are not signed here: nothing is kept on a
   stack. With -mbranch-protection the entry point gets a BTI landing pad
   and the object says so. */

#if defined(__aarch64__) && defined(__ELF__)

#include "common/gnu_property.h"

#include <asm/unistd.h>

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
    .globl pto_clone3_vfork
    .hidden pto_clone3_vfork
    .type pto_clone3_vfork, %function
pto_clone3_vfork:
    .cfi_startproc
    LANDING_PAD
    /* fn and arg where the child finds them: svc changes only x0, and the
       child starts with the parent's registers. */
    mov x9, x2
    mov x10, x3
    mov x8, #__NR_clone3
    svc #0
    cbz x0, 1f
    ret
1:
    /* The child, on its own stack, 16-byte aligned by the caller. */
    .cfi_undefined x30
    mov x29, #0
    mov x30, #0
    mov x0, x10
    blr x9
    brk #0
    .cfi_endproc
    .size pto_clone3_vfork, .-pto_clone3_vfork

#if AARCH64_FEATURES
    GNU_PROPERTY_NOTE(GNU_PROPERTY_AARCH64_FEATURE_1_AND, AARCH64_FEATURES)
#endif

#endif

    .section .note.GNU-stack, "", %progbits
