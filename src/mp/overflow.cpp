#include "mp/overflow.hpp"

#include "mp/scheduler.hpp"

#include <pthread.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <mutex>
#include <utility>

namespace pto::mp::detail {

namespace {

// Read by the handler: initial-exec TLS is a plain load from the thread
// pointer, where the general model may call into the dynamic linker.
__attribute__((tls_model("initial-exec"))) thread_local const std::span<const GuardRegion>* thread_guards =
    nullptr;

// The handler is process-wide and left in place after a run: installing it
// and putting back the previous one at every run cost more than the run. A
// run only checks that it is still there, since whoever replaced it meanwhile
// (a test framework, say) would otherwise get the overflows.
std::mutex handler_mutex;

// The signals a crash ends a process with: SIGSEGV for overflows, all of them
// to name the rank that crashed (abort() and std::terminate() raise SIGABRT).
constexpr std::array<int, 5> crash_signals{SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
std::array<struct sigaction, crash_signals.size()> previous_actions{};

constexpr const char* signal_name(int signal) noexcept
{
    switch (signal) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    }
    return "a signal";
}

std::size_t slot_of(int signal) noexcept
{
    return static_cast<std::size_t>(std::find(crash_signals.begin(), crash_signals.end(), signal) -
                                    crash_signals.begin());
}

// Room for the report, and for the previous handler if we chain to it:
// sanitizers' handlers print stack traces from there.
constexpr std::size_t alt_stack_floor = 256 * 1024;

// Async-signal-safe formatting: no stdio, no allocation.
class Line {
public:
    void text(const char* s) noexcept
    {
        while (*s != '\0' && used_ < sizeof buffer_) buffer_[used_++] = *s++;
    }

    void number(std::uintmax_t value, unsigned base) noexcept
    {
        char digits[32];
        std::size_t n = 0;
        do {
            digits[n++] = "0123456789abcdef"[value % base];
            value /= base;
        } while (value != 0);
        while (n > 0 && used_ < sizeof buffer_) buffer_[used_++] = digits[--n];
    }

    void write_to(int fd) const noexcept
    {
        std::size_t done = 0;
        while (done < used_) {
            const ssize_t n = ::write(fd, buffer_ + done, used_ - done);
            if (n < 0 && errno == EINTR) continue;
            // Nothing else can be done about a stderr that will not take it.
            if (n <= 0) return;
            done += static_cast<std::size_t>(n);
        }
    }

private:
    char buffer_[160];
    std::size_t used_ = 0;
};

void die_by_default(int signal, const siginfo_t* info) noexcept
{
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    // Cannot fail for a catchable signal with a valid action.
    sigaction(signal, &fallback, nullptr);
    // A fault kills when its instruction runs again on return; a signal that
    // was sent has to be sent again.
    if (info->si_code <= 0) raise(signal);
}

void report_and_die(const GuardRegion& guard, std::uintptr_t address, bool jumped, int signal,
                    const siginfo_t* info) noexcept
{
    Line line;
    line.text("pto::mp: rank ");
    line.number(static_cast<std::uintmax_t>(guard.rank), 10);
    line.text(" overflowed its ");
    line.number(guard.stack_bytes, 10);
    line.text("-byte stack");
    if (jumped) {
        line.text(": a frame larger than its ");
        line.number(guard.high - guard.low, 10);
        line.text("-byte guard region jumped it");
    }
    line.text(" (fault at 0x");
    line.number(address, 16);
    line.text(")\n");
    line.write_to(STDERR_FILENO);
    die_by_default(signal, info);
}

// The interrupted stack pointer; 0 where this file does not know the CPU.
std::uintptr_t interrupted_sp(const void* ucontext) noexcept
{
    const auto* uc = static_cast<const ucontext_t*>(ucontext);
#if defined(__x86_64__)
    return static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
#elif defined(__i386__)
    return static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_ESP]);
#elif defined(__aarch64__)
    return static_cast<std::uintptr_t>(uc->uc_mcontext.sp);
#else
    static_cast<void>(uc);
    return 0;
#endif
}

// Whether the fault is the running rank's overflow (or one into a guard
// region of this thread's ranks), which is then reported and dies.
bool reported_overflow(int signal, const siginfo_t* info, const void* ucontext) noexcept
{
    const auto* guards = thread_guards;
    if (signal != SIGSEGV || guards == nullptr || info->si_code <= 0) return false;
    const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
    // The running rank's stack pointer below its stack: it overflowed,
    // whether the fault is in its guard region or, past a frame larger
    // than that, somewhere below.
    const int running = Scheduler::running_rank();
    if (running >= 0 && static_cast<std::size_t>(running) < guards->size()) {
        const GuardRegion& own = (*guards)[static_cast<std::size_t>(running)];
        const std::uintptr_t sp = interrupted_sp(ucontext);
        const bool in_guard = address >= own.low && address < own.high;
        if (in_guard || (sp != 0 && sp < own.high && address < own.high)) {
            // Jumped: the frame reaches below the guard region. Its first
            // write may land in the stack mapped below (another rank's),
            // and the fault come only when the writes climb back into the
            // guard: the stack pointer tells.
            const bool jumped = (!in_guard && address < own.low) || (sp != 0 && sp < own.low);
            report_and_die(own, address, jumped, signal, info);
            return true;
        }
    }
    for (const GuardRegion& guard : *guards) {
        if (address < guard.low || address >= guard.high) continue;
        report_and_die(guard, address, false, signal, info);
        return true;
    }
    return false;
}

// Any other crash in a rank: the line says which rank ran, since what comes
// next (a core, "Aborted", terminate's own line) cannot.
void name_running_rank(int signal, const siginfo_t* info) noexcept
{
    const int running = Scheduler::running_rank();
    if (running < 0) return;
    Line line;
    line.text("pto::mp: ");
    line.text(signal_name(signal));
    if (info->si_code > 0 && signal != SIGABRT) {
        line.text(" (fault at 0x");
        line.number(reinterpret_cast<std::uintptr_t>(info->si_addr), 16);
        line.text(")");
    }
    line.text(" while rank ");
    line.number(static_cast<std::uintmax_t>(running), 10);
    line.text(" ran\n");
    line.write_to(STDERR_FILENO);
}

// How deep in handlers of ours this thread is. A handler installed over
// ours that calls the one it replaced (ours), with ours installed over it
// again by the next run, would call round for ever.
__attribute__((tls_model("initial-exec"))) thread_local int crash_depth = 0;

// What would have happened without us: the handler we replaced, run as the
// kernel would have run it (its mask, SA_NODEFER, SA_RESETHAND), or the
// signal's default action, or nothing for a sent signal that was ignored.
void pass_on(int signal, siginfo_t* info, void* ucontext) noexcept
{
    struct sigaction& saved = previous_actions[slot_of(signal)];
    const struct sigaction previous = saved;
    const bool siginfo = (previous.sa_flags & SA_SIGINFO) != 0;
    if (!siginfo && previous.sa_handler == SIG_IGN && info->si_code <= 0)
        return;
    // An ignored signal from a fault kills all the same, as the kernel
    // makes it.
    if (!siginfo && (previous.sa_handler == SIG_DFL || previous.sa_handler == SIG_IGN)) {
        die_by_default(signal, info);
        return;
    }
    if ((previous.sa_flags & SA_RESETHAND) != 0) {
        saved = {};
        saved.sa_handler = SIG_DFL;
    }
    sigset_t block = previous.sa_mask;
    if ((previous.sa_flags & SA_NODEFER) == 0)
        (void)sigaddset(&block, signal);  // cannot fail: a valid signal
    sigset_t before;
    // Cannot fail with valid sets.
    (void)pthread_sigmask(SIG_BLOCK, &block, &before);
    if ((previous.sa_flags & SA_NODEFER) != 0) {
        sigset_t own;
        sigemptyset(&own);
        (void)sigaddset(&own, signal);
        (void)pthread_sigmask(SIG_UNBLOCK, &own, nullptr);
    }
    if (siginfo)
        previous.sa_sigaction(signal, info, ucontext);
    else
        previous.sa_handler(signal);
    (void)pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

void on_crash(int signal, siginfo_t* info, void* ucontext) noexcept
{
    const int saved_errno = errno;
    if (crash_depth > 0) {
        // Called back by the handler we passed it on to: the default.
        die_by_default(signal, info);
        errno = saved_errno;
        return;
    }
    ++crash_depth;
    if (!reported_overflow(signal, info, ucontext)) {
        name_running_rank(signal, info);
        pass_on(signal, info, ucontext);
    }
    --crash_depth;
    errno = saved_errno;
}

// This thread's alternate signal stack, from its first run of ranks to its
// end, when the one it had before comes back. One the thread already has is
// kept if it is large enough.
class ThreadAltStack {
public:
    ThreadAltStack() noexcept
    {
        const long minimum = sysconf(_SC_MINSIGSTKSZ);  // -1 where unknown: the floor is ample
        bytes_ = std::max(alt_stack_floor, minimum > 0 ? static_cast<std::size_t>(minimum) : 0);
        stack_t current{};
        // Querying alone cannot fail.
        sigaltstack(nullptr, &current);
        if ((current.ss_flags & SS_DISABLE) == 0 && current.ss_size >= bytes_) return;
        void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        // Without memory for it the handler runs on the overflowed stack, and the
        // kernel kills the process with a bare SIGSEGV, as without us.
        if (p == MAP_FAILED) return;
        stack_t alt{};
        alt.ss_sp = p;
        alt.ss_size = bytes_;
        // EPERM: ranks run from a handler on the current alternate stack,
        // which must stay; the report is then lost, as above.
        if (sigaltstack(&alt, &previous_) != 0) {
            munmap(p, bytes_);
            return;
        }
        mapped_ = p;
    }
    ThreadAltStack(const ThreadAltStack&) = delete;
    ThreadAltStack& operator=(const ThreadAltStack&) = delete;

    ~ThreadAltStack()
    {
        if (mapped_ == nullptr) return;
        // Putting back what sigaltstack gave us cannot fail: the thread is
        // ending, not on the alternate stack, and it was valid.
        sigaltstack(&previous_, nullptr);
        munmap(mapped_, bytes_);
    }

private:
    void* mapped_ = nullptr;
    std::size_t bytes_ = 0;
    stack_t previous_{};
};

void install_handlers() noexcept
{
    for (std::size_t i = 0; i < crash_signals.size(); ++i) {
        struct sigaction current {};
        // Querying alone cannot fail.
        sigaction(crash_signals[i], nullptr, &current);
        if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == &on_crash) continue;
        const std::lock_guard lock(handler_mutex);
        struct sigaction action {};
        action.sa_sigaction = &on_crash;
        action.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&action.sa_mask);
        struct sigaction replaced {};
        // Where it cannot be installed, the crash is bare, as without us.
        if (sigaction(crash_signals[i], &action, &replaced) != 0) continue;
        // Another thread may have installed it between the query and the lock.
        if ((replaced.sa_flags & SA_SIGINFO) == 0 || replaced.sa_sigaction != &on_crash)
            previous_actions[i] = replaced;
    }
}

}  // namespace

OverflowReport::OverflowReport(std::span<const GuardRegion> guards) noexcept : guards_(guards)
{
    previous_guards_ = std::exchange(thread_guards, &guards_);
    install_handlers();
    static thread_local const ThreadAltStack alt_stack;
}

OverflowReport::~OverflowReport()
{
    thread_guards = previous_guards_;
}

}  // namespace pto::mp::detail
