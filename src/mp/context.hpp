// The seam every switch between ranks goes through. A backend (asm_switch.hpp,
// ucontext_switch.hpp) moves the CPU from one stack to another; this wrapper
// keeps, per context, what the thread would otherwise share: the C++
// exception state, and ASan's notion of the current stack.
#pragma once

#include "mp/asm_switch.hpp"
#include "mp/eh_state.hpp"
#include "mp/result.hpp"
#include "mp/ucontext_switch.hpp"

#include <pto/mp.hpp>

#include <cstddef>
#include <span>
#include <variant>

namespace pto::mp::detail {

// A switch that exists in this build: `assembly` is the hand-written one
// (switch.hpp, about ten nanoseconds), `ucontext` is swapcontext(3), portable,
// which also saves the signal mask at the cost of a system call per switch.
enum class SwitchKind : unsigned char { assembly, ucontext };

// Whether this build has an assembly switch for its CPU.
bool assembly_built() noexcept;

// The features of the calling thread's CET shadow stack, as
// arch_prctl(ARCH_SHSTK_STATUS) reports them; 0 where there is none, on
// other CPUs, and on kernels before 6.6, which do not know the call.
unsigned long shadow_stack_features() noexcept;

// The switch a spawn uses. `automatic` means what `automatic_means` says (the
// Meson option `context`, or the test harness's override), and for `automatic`
// that is the assembly switch only where it is built and safe: under an active
// shadow stack it is not (its `ret` lands on another stack), so ucontext.
// Asking for assembly explicitly where it is missing or unsafe is an error.
// Pure, so that the tests can hand it any machine.
Expected<SwitchKind> choose_switch(ContextKind requested, ContextKind automatic_means, bool assembly_is_built,
                                   unsigned long shadow_stack) noexcept;

// choose_switch for this build and thread.
Expected<SwitchKind> choose_switch(ContextKind requested);

// What `automatic` means from now on in this process: the build's default
// unless the tests or the benchmark set it.
void set_automatic(ContextKind means) noexcept;

// Somewhere execution is suspended and can be resumed: the thread's own stack,
// or a rank's. Contexts never move, since a prepared stack points back at its.
class Context {
public:
    Context() = default;
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    // Makes this the context of the calling thread's own stack.
    void adopt_thread(SwitchKind kind);

    // Makes this context run next = entry(arg) on `stack` when first switched
    // to, and then switch to `next` for good.
    Expected<void> prepare(SwitchKind kind, std::span<std::byte> stack, Context& (*entry)(void*),
                           void* arg);

    // Suspends this context, which must be the running one, and resumes `to`;
    // returns once some context switches back to this one.
    void switch_to(Context& to) noexcept;

    // The exception state this context had when it last switched away.
    const EhState& suspended_eh_state() const noexcept { return eh_; }

private:
    // Every context of a spawn has the same backend, so `to` of a switch holds
    // the alternative its `from` holds.
#if PTO_MP_ASM_SWITCH
    using Backend = std::variant<UcontextSwitch, AsmSwitch>;
#else
    using Backend = std::variant<UcontextSwitch>;
#endif

    static void enter(void* self) noexcept;
    [[noreturn]] void exit_to(Context& to) noexcept;
    void jump(Context& to) noexcept;
    void landed() noexcept;

    Backend backend_;
    EhState eh_{};
    Context& (*entry_)(void*) = nullptr;
    void* arg_ = nullptr;
    // Stack bounds for ASan; the thread's own are learnt at its first switch.
    const void* stack_bottom_ = nullptr;
    std::size_t stack_size_ = 0;
    void* asan_fake_stack_ = nullptr;
};

}  // namespace pto::mp::detail
