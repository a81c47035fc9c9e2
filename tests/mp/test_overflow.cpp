// Stack overflow in a rank: the guard region stops frames far larger than a
// page, and the process dies of SIGSEGV with a line naming the rank. Each case
// runs the overflow in a forked child and watches it die.
#include "mp/stack.hpp"
#include "support.hpp"

#include <doctest/doctest.h>
#include <pto/mp.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <string>

namespace mp = pto::mp;
using mp_test::Death;
using mp_test::in_child;

namespace {

constexpr std::size_t rank_stack = 32 * 1024;

// A frame of Bytes whose lowest byte is written first, as code that fills an
// array from its start does: without probing, the first access lands Bytes
// below the stack pointer, beyond any guard smaller than that. Compiled
// without stack-clash probes, so that only the guard region's size stops it.
template <std::size_t Bytes>
[[gnu::noinline, gnu::optimize("no-stack-clash-protection")]] int big_frame(int seed)
{
    volatile char array[Bytes];
    for (std::size_t i = 0; i < Bytes; i += 512) array[i] = static_cast<char>(seed);
    return array[Bytes / 2];
}

// The same frame where the compiler probes it page by page, as the library
// and these tests are built where the compiler can.
template <std::size_t Bytes>
[[gnu::noinline]] int probed_frame(int seed)
{
    volatile char array[Bytes];
    for (std::size_t i = 0; i < Bytes; i += 512) array[i] = static_cast<char>(seed);
    return array[Bytes / 2];
}

template <int (*Frame)(int)>
void check_rank_dies(int victim)
{
    const Death death = in_child([victim] {
        int sink = 0;
        mp::spawn(
            [&](int rank) {
                mp::barrier();
                if (rank == victim) sink += Frame(rank);
                mp::barrier();
            },
            4, {.stack_bytes = rank_stack});
        // Reaching this means the frame landed in memory that was not its own.
        std::_Exit(sink == 12345 ? 3 : 4);
    });
    INFO("child stderr: " << death.stderr_text);
    REQUIRE(WIFSIGNALED(death.status));
    CHECK(WTERMSIG(death.status) == SIGSEGV);
    CHECK(mp_test::contains(death.stderr_text, "pto::mp: rank " + std::to_string(victim) + " overflowed its " +
                                                   std::to_string(rank_stack) + "-byte stack (fault at 0x"));
}

bool segv_handler_is(void (*handler)(int))
{
    struct sigaction current {};
    sigaction(SIGSEGV, nullptr, &current);
    return (current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == handler;
}

void exit_42(int)
{
    _exit(42);
}

}  // namespace

TEST_SUITE("mp.overflow")
{
    TEST_CASE("a 40 KiB or 44 KiB frame on a 32 KiB stack kills the process, naming the rank")
    {
        SUBCASE("40 KiB, rank 1") { check_rank_dies<&big_frame<40 * 1024>>(1); }
        SUBCASE("44 KiB, rank 3") { check_rank_dies<&big_frame<44 * 1024>>(3); }
        SUBCASE("44 KiB probed, rank 0") { check_rank_dies<&probed_frame<44 * 1024>>(0); }
    }

    TEST_CASE("frames almost as large as the guard region cannot reach past it")
    {
        // Half the guard: on 64-bit targets 512 KiB, far above any frame a
        // port of torch code would have.
        check_rank_dies<&big_frame<mp::detail::guard_bytes / 2>>(2);
    }

    TEST_CASE("a SIGSEGV that is no guard hit reaches the handler installed before")
    {
        // Sent rather than faulted: valgrind would count a real bad access
        // against the exit status this case checks.
        const Death death = in_child([] {
            signal(SIGSEGV, &exit_42);
            mp::spawn(
                [](int rank) {
                    if (rank == 1) raise(SIGSEGV);
                },
                2);
        });
        INFO("child stderr: " << death.stderr_text);
        REQUIRE(WIFEXITED(death.status));
        CHECK(WEXITSTATUS(death.status) == 42);
        CHECK_FALSE(mp_test::contains(death.stderr_text, "overflowed"));
    }

    TEST_CASE("the caller's SIGSEGV handler and alternate stack are back after a spawn")
    {
        const auto old_handler = signal(SIGSEGV, &exit_42);
        static char own_alt_stack[64 * 1024];
        stack_t mine{};
        mine.ss_sp = own_alt_stack;
        mine.ss_size = sizeof own_alt_stack;
        stack_t before{};
        REQUIRE(sigaltstack(&mine, &before) == 0);
        bool ours_inside = true;
        mp::spawn([&](int) { ours_inside = ours_inside && !segv_handler_is(&exit_42); }, 2);
        CHECK(ours_inside);
        CHECK(segv_handler_is(&exit_42));
        stack_t after{};
        REQUIRE(sigaltstack(&before, &after) == 0);
        CHECK(after.ss_sp == own_alt_stack);
        CHECK(after.ss_size == sizeof own_alt_stack);
        signal(SIGSEGV, old_handler);
    }
}
