#include "mp/ucontext_switch.hpp"

#include <array>
#include <cerrno>
#include <cfenv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

namespace pto::mp::detail {

namespace {

// makecontext passes only ints to the entry function, so a pointer travels in
// as many of them as it takes: one on ILP32 targets, two on LP64.
constexpr std::size_t pointer_words = (sizeof(void*) + sizeof(unsigned) - 1) / sizeof(unsigned);
static_assert(pointer_words * sizeof(unsigned) == sizeof(void*), "a pointer must be whole unsigned ints");
using PointerWords = std::array<unsigned, pointer_words>;

}  // namespace

template <std::size_t... I>
struct UcontextEntry<std::index_sequence<I...>> {
    static void enter(std::conditional_t<true, unsigned, decltype(I)>... word) noexcept
    {
        const PointerWords words{word...};
        const UcontextSwitch* self = nullptr;
        std::memcpy(&self, words.data(), sizeof self);
#if !defined(__x86_64__) && !defined(__i386__)
        // Where the flags are not in uc_mcontext (aarch64's FPSR), a rank
        // clears the creating thread's at its first instruction instead.
        std::feclearexcept(FE_ALL_EXCEPT);
#endif
        self->enter_(self->arg_);
    }

    static void make(ucontext_t& uc, const UcontextSwitch* self) noexcept
    {
        PointerWords words{};
        std::memcpy(words.data(), &self, sizeof self);
        makecontext(&uc, reinterpret_cast<void (*)()>(&enter), static_cast<int>(pointer_words), words[I]...);
    }
};

namespace {

// A failed switch leaves no context to report from: the one we left is
// suspended and the one we aimed at never ran.
[[noreturn]] void switch_failed(const char* call)
{
    std::fprintf(stderr, "pto::mp: %s failed: %s\n", call, std::strerror(errno));
    std::abort();
}

// A new context starts with no floating-point exception flags raised, as
// on the assembly switch: getcontext took the creating thread's.
void clear_exception_flags(ucontext_t& uc) noexcept
{
#if defined(__x86_64__)
    if (uc.uc_mcontext.fpregs == nullptr) return;
    uc.uc_mcontext.fpregs->mxcsr &= ~0x3fU;
    uc.uc_mcontext.fpregs->swd &= static_cast<unsigned short>(~0xffU);
#elif defined(__i386__)
    if (uc.uc_mcontext.fpregs == nullptr) return;
    uc.uc_mcontext.fpregs->sw &= ~0xffUL;
#else
    // aarch64's getcontext keeps FPSR in a record of its own: enter()
    // clears the flags there.
    static_cast<void>(uc);
#endif
}

}  // namespace

void UcontextSwitch::adopt_thread()
{
    uc_ = std::make_unique<ucontext_t>();
}

Expected<void> UcontextSwitch::prepare(std::span<std::byte> stack, void (*enter)(void*), void* arg)
{
    uc_ = std::make_unique<ucontext_t>();
    if (getcontext(uc_.get()) != 0) return fail("getcontext", errno);
    enter_ = enter;
    arg_ = arg;
    uc_->uc_stack.ss_sp = stack.data();
    uc_->uc_stack.ss_size = stack.size();
    uc_->uc_link = nullptr;  // entry never returns
    clear_exception_flags(*uc_);
    UcontextEntry<std::make_index_sequence<pointer_words>>::make(*uc_, this);
    return {};
}

void UcontextSwitch::jump(UcontextSwitch& to) noexcept
{
    if (swapcontext(uc_.get(), to.uc_.get()) != 0) switch_failed("swapcontext");
}

}  // namespace pto::mp::detail
