#include "mp/context.hpp"

#include "mp/annotations.hpp"
#include "mp/switch_x86_64.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace pto::mp::detail {

namespace {

#if PTO_MP_HAVE_ASM_SWITCH
constexpr SwitchKind best_switch = SwitchKind::assembly;
#else
constexpr SwitchKind best_switch = SwitchKind::ucontext;
#endif

std::atomic<SwitchKind> chosen_switch{best_switch};

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

}  // namespace

SwitchKind default_switch() noexcept
{
    return chosen_switch.load(std::memory_order_relaxed);
}

void set_default_switch(SwitchKind kind) noexcept
{
    chosen_switch.store(kind == SwitchKind::assembly ? best_switch : kind, std::memory_order_relaxed);
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
#if PTO_MP_HAVE_ASM_SWITCH
    if (kind_ == SwitchKind::assembly) {
        sp_ = prepare_x86_64_stack(stack, &Context::enter, this);
        return {};
    }
#endif
    uc_ = std::make_unique<ucontext_t>();
    if (getcontext(uc_.get()) != 0) return tl::unexpected(sys_error("getcontext", errno));
    uc_->uc_stack.ss_sp = stack.data();
    uc_->uc_stack.ss_size = stack.size();
    uc_->uc_link = nullptr;  // entry never returns
    // makecontext passes only ints; the pointer travels in two halves.
    static_assert(sizeof(Context*) == 2 * sizeof(int), "a Context* must split into two ints");
    int halves[2];
    Context* self = this;
    std::memcpy(halves, &self, sizeof self);
    makecontext(uc_.get(), reinterpret_cast<void (*)()>(&Context::enter_ucontext), 2, halves[0], halves[1]);
    return {};
}

void Context::enter_ucontext(int half0, int half1) noexcept
{
    const int halves[2] = {half0, half1};
    Context* self = nullptr;
    std::memcpy(&self, halves, sizeof self);
    enter(self);
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
#if PTO_MP_HAVE_ASM_SWITCH
    if (kind_ == SwitchKind::assembly) {
        pto_mp_switch_x86_64(&sp_, to.sp_);
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
