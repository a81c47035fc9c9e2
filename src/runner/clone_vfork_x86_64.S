/* clone3 as vfork does it, for a child born in a cgroup; see launcher.cpp.

   long pto_clone3_vfork(struct clone_args* args, size_t size,
                         void (*fn)(const void*), const void* arg)

   With CLONE_VM | CLONE_VFORK the parent waits until the child execs or
   exits, and shares its memory, so nothing is copied. The child runs on the
   stack in args (its own), calls fn(arg), which never returns, and so never
   returns from this function: the parent's stack and its shadow stack keep
   every entry they had, and the parent returns normally. Returns the
   child's pid, or -errno, in the parent. */

#if defined(__x86_64__) && defined(__ELF__)

#include "common/gnu_property.h"

#include <asm/unistd.h>

#if defined(__CET__)
#define X86_FEATURES __CET__ /* IBT 1, SHSTK 2: both hold, see above */
#else
#define X86_FEATURES 0
#endif
#if X86_FEATURES & 1
#define LANDING_PAD endbr64
#else
#define LANDING_PAD
#endif

    .text
    .p2align 4
    .globl pto_clone3_vfork
    .hidden pto_clone3_vfork
    .type pto_clone3_vfork, @function
pto_clone3_vfork:
    .cfi_startproc
    LANDING_PAD
    /* fn and arg where the syscall keeps them: it clobbers only rax, rcx
       and r11, and the child starts with the parent's registers. */
    movq %rdx, %r8
    movq %rcx, %r9
    movl $__NR_clone3, %eax
    syscall
    testq %rax, %rax
    jz 1f
    ret
1:
    /* The child, on its own stack, 16-byte aligned by the caller. */
    .cfi_undefined rip
    xorl %ebp, %ebp
    movq %r9, %rdi
    callq *%r8
    ud2
    .cfi_endproc
    .size pto_clone3_vfork, .-pto_clone3_vfork

#if X86_FEATURES
    GNU_PROPERTY_NOTE(GNU_PROPERTY_X86_FEATURE_1_AND, X86_FEATURES)
#endif

#endif

    .section .note.GNU-stack, "", %progbits
