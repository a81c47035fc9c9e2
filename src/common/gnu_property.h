/* For hand-written assembly (.S): the note that says which control-flow
   protections an object keeps (x86 IBT and SHSTK, AArch64 BTI and PAC).
   The linker marks a program with a protection only if every object
   says it keeps it, so each assembly object must say it for itself.
   Only what the object really keeps may be claimed. */
#pragma once

#define GNU_PROPERTY_X86_FEATURE_1_AND 0xc0000002
#define GNU_PROPERTY_AARCH64_FEATURE_1_AND 0xc0000000

/* An NT_GNU_PROPERTY_TYPE_0 note with one AND property. */
#define GNU_PROPERTY_NOTE(type, features)     \
    .pushsection .note.gnu.property, "a";     \
    .p2align 3;                               \
    .long 4;        /* name size */           \
    .long 16;       /* descriptor size */     \
    .long 5;        /* NT_GNU_PROPERTY_TYPE_0 */ \
    .asciz "GNU";                             \
    .long type;                               \
    .long 4;                                  \
    .long features;                           \
    .p2align 3;                               \
    .popsection
