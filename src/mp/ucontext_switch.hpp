// swapcontext(3) as a context backend: portable, and it saves the signal mask
// too, at the cost of a system call per switch.
#pragma once

#include "mp/result.hpp"

#include <ucontext.h>

#include <cstddef>
#include <memory>
#include <span>

namespace pto::mp::detail {

// Starts a prepared context (ucontext_switch.cpp).
template <class WordIndices>
struct UcontextEntry;

class UcontextSwitch {
public:
    // swapcontext needs somewhere to save the thread's registers.
    void adopt_thread();

    Expected<void> prepare(std::span<std::byte> stack, void (*enter)(void*), void* arg);

    void jump(UcontextSwitch& to) noexcept;

private:
    template <class WordIndices>
    friend struct UcontextEntry;

    std::unique_ptr<ucontext_t> uc_;  // ~1 KiB, so not inline
    void (*enter_)(void*) = nullptr;
    void* arg_ = nullptr;
};

}  // namespace pto::mp::detail
