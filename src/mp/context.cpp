#include "mp/context.hpp"

#include "mp/annotations.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <type_traits>
#include <variant>

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

}  // namespace

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
#if PTO_MP_ASM_SWITCH
    if (kind == SwitchKind::assembly) backend_.emplace<AsmSwitch>();
#else
    static_cast<void>(kind);
#endif
    std::visit([](auto& backend) { backend.adopt_thread(); }, backend_);
}

Expected<void> Context::prepare(SwitchKind kind, std::span<std::byte> stack, Context& (*entry)(void*),
                                void* arg)
{
    entry_ = entry;
    arg_ = arg;
    stack_bottom_ = stack.data();
    stack_size_ = stack.size();
#if PTO_MP_ASM_SWITCH
    if (kind == SwitchKind::assembly) {
        backend_.emplace<AsmSwitch>().prepare(stack, &Context::enter, this);
        return {};
    }
#else
    static_cast<void>(kind);
#endif
    return std::get<UcontextSwitch>(backend_).prepare(stack, &Context::enter, this);
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
    std::visit([&](auto& from) { from.jump(*std::get_if<std::decay_t<decltype(from)>>(&to.backend_)); }, backend_);
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
