// A fresh context's first frame, as pto_mp_switch expects to find it (see the
// frame layouts in switch_x86_64.S and switch_aarch64.S).
#include "mp/switch.hpp"

#if PTO_MP_ASM_SWITCH

#include <cstdint>

extern "C" void pto_mp_start() noexcept;

namespace pto::mp::detail {

namespace {

std::uint64_t address(const void* p)
{
    return reinterpret_cast<std::uintptr_t>(p);
}

}  // namespace

#if defined(__x86_64__)

void* prepare_asm_stack(std::span<std::byte> stack, void (*enter)(void*), void* arg) noexcept
{
    const auto top = reinterpret_cast<std::uintptr_t>(stack.data() + stack.size()) & ~std::uintptr_t{15};
    auto* slot = reinterpret_cast<std::uint64_t*>(top);
    // Two empty words: after the switch's `ret` pops the start address the stack
    // pointer is 16-byte aligned again, as the `call` in the start stub needs.
    *--slot = 0;
    *--slot = 0;
    *--slot = address(reinterpret_cast<const void*>(&pto_mp_start));
    *--slot = 0;  // rbp: a null frame pointer ends frame-pointer walks here
    *--slot = 0;  // rbx
    *--slot = address(arg);                                      // r12
    *--slot = address(reinterpret_cast<const void*>(enter));     // r13
    *--slot = 0;  // r14
    *--slot = 0;  // r15
    // A new context starts with the creating thread's rounding mode and
    // masks, and with no exception flags raised (MXCSR bits 0-5; the x87
    // status byte, 0), as on aarch64.
    std::uint32_t mxcsr = 0;
    std::uint16_t fpu_control = 0;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpu_control));
    mxcsr &= ~std::uint32_t{0x3f};
    *--slot = mxcsr | std::uint64_t{fpu_control} << 32;
    return slot;
}

#elif defined(__aarch64__)

void* prepare_asm_stack(std::span<std::byte> stack, void (*enter)(void*), void* arg) noexcept
{
    const auto top = reinterpret_cast<std::uintptr_t>(stack.data() + stack.size()) & ~std::uintptr_t{15};
    constexpr std::size_t frame_words = 176 / 8;
    auto* frame = reinterpret_cast<std::uint64_t*>(top) - frame_words;
    for (std::size_t i = 0; i < frame_words; ++i) frame[i] = 0;
    frame[0] = address(arg);                                   // x19
    frame[1] = address(reinterpret_cast<const void*>(enter));  // x20
    // x29 stays null, ending frame-pointer walks; x30 is where `ret` goes.
    frame[11] = address(reinterpret_cast<const void*>(&pto_mp_start));
    // A new context starts with the creating thread's rounding mode and traps,
    // and with no exception flags raised.
    std::uint64_t fpcr = 0;
    asm volatile("mrs %0, fpcr" : "=r"(fpcr));
    frame[20] = fpcr;
    return frame;
}

#endif

}  // namespace pto::mp::detail

#endif
