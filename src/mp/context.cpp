#include "mp/context.hpp"

#include "mp/annotations.hpp"
#include "mp/switch.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#ifndef PTO_MP_AUTOMATIC_CONTEXT
#define PTO_MP_AUTOMATIC_CONTEXT automatic
#endif

namespace pto::mp::detail {

namespace {

std::atomic<ContextKind> automatic_means{ContextKind::PTO_MP_AUTOMATIC_CONTEXT};

#if PTO_MP_ASAN
// The context being left; the one landing records its stack bounds if they are
// still unknown, which is how the thread's own stack gets them.
thread_local Context* leaving = nullptr;
#endif

// A failed switch leaves no context to report from: the one we left is
// suspended and the one we aimed at never ran.
[[noreturn]] void switch_failed(const char* call)
{
    std::fprintf(stderr, "pto::mp: %s failed: %s\n", call, std::strerror(errno));
    std::abort();
}

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
        void* self = nullptr;
        std::memcpy(&self, words.data(), sizeof self);
        Context::enter(self);
    }

    static void make(ucontext_t& uc, void* self) noexcept
    {
        PointerWords words{};
        std::memcpy(words.data(), &self, sizeof self);
        makecontext(&uc, reinterpret_cast<void (*)()>(&enter), static_cast<int>(pointer_words), words[I]...);
    }
};

bool assembly_built() noexcept
{
#if PTO_MP_ASM_SWITCH
    return true;
#else
    return false;
#endif
}

unsigned long shadow_stack_features() noexcept
{
#if defined(__x86_64__) && defined(SYS_arch_prctl)
    // ARCH_SHSTK_STATUS, from Linux 6.6's asm/prctl.h, which older headers lack.
    constexpr int arch_shstk_status = 0x5005;
    unsigned long features = 0;
    // Older kernels fail with EINVAL: they cannot have enabled a shadow stack.
    if (syscall(SYS_arch_prctl, arch_shstk_status, &features) != 0) return 0;
    return features;
#else
    return 0;
#endif
}

Expected<SwitchKind> choose_switch(ContextKind requested, ContextKind automatic, bool assembly_is_built,
                                   unsigned long shadow_stack) noexcept
{
    // ARCH_SHSTK_SHSTK: the thread runs with a shadow stack.
    const bool shadow_stack_on = (shadow_stack & 1) != 0;
    const ContextKind kind = requested == ContextKind::automatic ? automatic : requested;
    switch (kind) {
    case ContextKind::ucontext: return SwitchKind::ucontext;
    case ContextKind::automatic:
        return assembly_is_built && !shadow_stack_on ? SwitchKind::assembly : SwitchKind::ucontext;
    case ContextKind::assembly:
        if (!assembly_is_built) return fail("this build has no assembly context switch for its CPU");
        if (shadow_stack_on)
            return fail("the assembly context switch is unsafe under the CET shadow stack this thread runs with");
        return SwitchKind::assembly;
    }
    return SwitchKind::ucontext;
}

Expected<SwitchKind> choose_switch(ContextKind requested)
{
    const ContextKind automatic = automatic_means.load(std::memory_order_relaxed);
    const bool wants_assembly = requested == ContextKind::assembly ||
                                (requested == ContextKind::automatic && automatic != ContextKind::ucontext);
    // The system call only where its answer matters.
    const unsigned long shadow_stack = wants_assembly && assembly_built() ? shadow_stack_features() : 0;
    return choose_switch(requested, automatic, assembly_built(), shadow_stack);
}

void set_automatic(ContextKind means) noexcept
{
    automatic_means.store(means, std::memory_order_relaxed);
}

void Context::adopt_thread(SwitchKind kind)
{
    kind_ = kind;
    // swapcontext needs somewhere to save the thread's registers.
    if (kind_ == SwitchKind::ucontext) uc_ = std::make_unique<ucontext_t>();
}

Expected<void> Context::prepare(SwitchKind kind, std::span<std::byte> stack, Context& (*entry)(void*),
                                void* arg)
{
    kind_ = kind;
    entry_ = entry;
    arg_ = arg;
    stack_bottom_ = stack.data();
    stack_size_ = stack.size();
#if PTO_MP_ASM_SWITCH
    if (kind_ == SwitchKind::assembly) {
        sp_ = prepare_asm_stack(stack, &Context::enter, this);
        return {};
    }
#endif
    uc_ = std::make_unique<ucontext_t>();
    if (getcontext(uc_.get()) != 0) return fail("getcontext", errno);
    uc_->uc_stack.ss_sp = stack.data();
    uc_->uc_stack.ss_size = stack.size();
    uc_->uc_link = nullptr;  // entry never returns
    UcontextEntry<std::make_index_sequence<pointer_words>>::make(*uc_, this);
    return {};
}

void Context::enter(void* self) noexcept
{
    auto& context = *static_cast<Context*>(self);
    context.landed();
    context.exit_to(context.entry_(context.arg_));
}

void Context::switch_to(Context& to) noexcept
{
    EhState& thread = thread_eh_state();
    eh_ = thread;
    thread = to.eh_;
    asan_start_switch(&asan_fake_stack_, to.stack_bottom_, to.stack_size_);
    jump(to);
    landed();
}

void Context::exit_to(Context& to) noexcept
{
    thread_eh_state() = to.eh_;
    // No fake stack to keep: ASan frees this context's.
    asan_start_switch(nullptr, to.stack_bottom_, to.stack_size_);
    jump(to);
    // Nothing switches back to a context that has exited.
    std::abort();
}

void Context::jump(Context& to) noexcept
{
#if PTO_MP_ASAN
    leaving = this;
#endif
#if PTO_MP_ASM_SWITCH
    if (kind_ == SwitchKind::assembly) {
        pto_mp_switch(&sp_, to.sp_);
        return;
    }
#endif
    if (swapcontext(uc_.get(), to.uc_.get()) != 0) switch_failed("swapcontext");
}

void Context::landed() noexcept
{
#if PTO_MP_ASAN
    const void* bottom = nullptr;
    std::size_t size = 0;
    asan_finish_switch(asan_fake_stack_, &bottom, &size);
    if (leaving->stack_bottom_ == nullptr) {
        leaving->stack_bottom_ = bottom;
        leaving->stack_size_ = size;
    }
#endif
}

}  // namespace pto::mp::detail
