// The seam every switch between ranks goes through. Besides moving the CPU from
// one stack to another it keeps, per context, what the thread would otherwise
// share: the C++ exception state, and ASan's notion of the current stack.
#pragma once

#include "mp/eh_state.hpp"

#include <pto/error.hpp>

#include <ucontext.h>

#include <cstddef>
#include <memory>
#include <span>

namespace pto::mp::detail {

// `assembly` is the hand-written x86-64 switch (about ten nanoseconds);
// `ucontext` is swapcontext(3), portable, which also saves the signal mask at
// the cost of a system call per switch.
enum class SwitchKind : unsigned char { assembly, ucontext };

// What new spawns use: assembly where it exists, else ucontext.
SwitchKind default_switch() noexcept;
// Lets the tests and the benchmark run both kinds; asking for assembly where it
// does not exist keeps ucontext.
void set_default_switch(SwitchKind kind) noexcept;

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

private:
    static void enter(void* self) noexcept;
    static void enter_ucontext(int half0, int half1) noexcept;
    [[noreturn]] void exit_to(Context& to) noexcept;
    void jump(Context& to) noexcept;
    void landed() noexcept;

    SwitchKind kind_ = SwitchKind::assembly;
    void* sp_ = nullptr;                 // assembly: the suspended stack pointer
    std::unique_ptr<ucontext_t> uc_;     // ucontext only: ~1 KiB, so not inline
    EhState eh_{};
    Context& (*entry_)(void*) = nullptr;
    void* arg_ = nullptr;
    // Stack bounds for ASan; the thread's own are learnt at its first switch.
    const void* stack_bottom_ = nullptr;
    std::size_t stack_size_ = 0;
    void* asan_fake_stack_ = nullptr;
};

}  // namespace pto::mp::detail
