#include "mp/overflow.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <mutex>

namespace pto::mp::detail {

namespace {

// Read by the handler: initial-exec TLS is a plain load from the thread
// pointer, where the general model may call into the dynamic linker.
__attribute__((tls_model("initial-exec"))) thread_local const std::span<const GuardRegion>* thread_guards =
    nullptr;

// The handler is process-wide: the first thread to run ranks installs it, the
// last puts back what it found.
std::mutex handler_mutex;
int handler_users = 0;
struct sigaction previous_action {};

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
    // Cannot fail for SIGSEGV with a valid action.
    sigaction(signal, &fallback, nullptr);
    // A fault kills when its instruction runs again on return; a signal that
    // was sent has to be sent again.
    if (info->si_code <= 0) raise(signal);
}

void on_segv(int signal, siginfo_t* info, void* ucontext) noexcept
{
    const int saved_errno = errno;
    const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
    if (const auto* guards = thread_guards; guards != nullptr && info->si_code > 0) {
        for (const GuardRegion& guard : *guards) {
            if (address < guard.low || address >= guard.high) continue;
            Line line;
            line.text("pto::mp: rank ");
            line.number(static_cast<std::uintmax_t>(guard.rank), 10);
            line.text(" overflowed its ");
            line.number(guard.stack_bytes, 10);
            line.text("-byte stack (fault at 0x");
            line.number(address, 16);
            line.text(")\n");
            line.write_to(STDERR_FILENO);
            die_by_default(signal, info);
            errno = saved_errno;
            return;
        }
    }
    // Not ours: what would have happened without us.
    const struct sigaction previous = previous_action;
    if ((previous.sa_flags & SA_SIGINFO) != 0) {
        previous.sa_sigaction(signal, info, ucontext);
    } else if (previous.sa_handler == SIG_DFL || previous.sa_handler == SIG_IGN) {
        // An ignored SIGSEGV from a fault kills all the same.
        die_by_default(signal, info);
    } else {
        previous.sa_handler(signal);
    }
    errno = saved_errno;
}

}  // namespace

OverflowReport::OverflowReport(std::span<const GuardRegion> guards) noexcept : guards_(guards)
{
    previous_guards_ = thread_guards;
    thread_guards = &guards_;
    {
        const std::lock_guard lock(handler_mutex);
        if (handler_users == 0) {
            struct sigaction action {};
            action.sa_sigaction = &on_segv;
            action.sa_flags = SA_SIGINFO | SA_ONSTACK;
            sigemptyset(&action.sa_mask);
            handler_installed_ = sigaction(SIGSEGV, &action, &previous_action) == 0;
        } else {
            handler_installed_ = true;
        }
        if (handler_installed_) ++handler_users;
    }
    if (!handler_installed_) return;

    const long minimum = sysconf(_SC_MINSIGSTKSZ);  // -1 where unknown: the floor is ample
    alt_stack_bytes_ = std::max(alt_stack_floor, minimum > 0 ? static_cast<std::size_t>(minimum) : 0);
    void* p = mmap(nullptr, alt_stack_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    // Without memory for it the handler runs on the overflowed stack, and the
    // kernel kills the process with a bare SIGSEGV, as without us.
    if (p == MAP_FAILED) return;
    stack_t alt{};
    alt.ss_sp = p;
    alt.ss_size = alt_stack_bytes_;
    // EPERM: spawn was called from a handler running on the current alternate
    // stack, which must stay; the report is then lost, as above.
    if (sigaltstack(&alt, &previous_alt_stack_) != 0) {
        munmap(p, alt_stack_bytes_);
        return;
    }
    alt_stack_ = p;
}

OverflowReport::~OverflowReport()
{
    if (alt_stack_ != nullptr) {
        // Putting back what sigaltstack gave us cannot fail: we are not on
        // the alternate stack, and it was valid.
        sigaltstack(&previous_alt_stack_, nullptr);
        munmap(alt_stack_, alt_stack_bytes_);
    }
    if (handler_installed_) {
        const std::lock_guard lock(handler_mutex);
        if (--handler_users == 0) {
            // Put back the previous handler unless someone replaced ours
            // meanwhile: theirs stays.
            struct sigaction current {};
            sigaction(SIGSEGV, nullptr, &current);
            if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == &on_segv)
                sigaction(SIGSEGV, &previous_action, nullptr);
        }
    }
    thread_guards = previous_guards_;
}

}  // namespace pto::mp::detail
