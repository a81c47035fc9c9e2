// Stack overflow in a rank: the guard region stops frames far larger than a
// page, and the process dies of SIGSEGV with a line naming the rank; any other
// crash in a rank is named too. Each case runs the crash in a forked child and
// watches it die.
#include "mp/stack.hpp"
#include "support.hpp"

#include <doctest/doctest.h>
#include <pto/mp.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <cstddef>
#include <cstdlib>
#include <exception>
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
#if defined(__clang__)
[[gnu::noinline]]  // Clang has no attribute for that: its build probes it
#else
[[gnu::noinline, gnu::optimize("no-stack-clash-protection")]]
#endif
int big_frame(int seed)
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

// `how` comes between the stack and the fault address in the report.
template <int (*Frame)(int)>
void check_rank_dies(int victim, const std::string& how = "")
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
                                                   std::to_string(rank_stack) + "-byte stack" + how +
                                                   " (fault at 0x"));
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

    TEST_CASE("abort(), std::terminate() and a fault that is no overflow name the rank that ran")
    {
        const auto crash_in = [](int victim, void (*crash)()) {
            return in_child([=] {
                // The default actions, not the test framework's reports.
                signal(SIGABRT, SIG_DFL);
                signal(SIGSEGV, SIG_DFL);
                mp::spawn(
                    [=](int rank) {
                        mp::barrier();
                        if (rank == victim) crash();
                        mp::barrier();
                    },
                    4);
            });
        };
        // Dies of `signal` as without the library, after `line` on stderr.
        const auto check_death = [](const Death& death, int signal, const std::string& line) {
            INFO("child stderr: " << death.stderr_text);
            REQUIRE(WIFSIGNALED(death.status));
            CHECK(WTERMSIG(death.status) == signal);
            CHECK(mp_test::contains(death.stderr_text, line));
            CHECK_FALSE(mp_test::contains(death.stderr_text, "overflowed"));
        };
        SUBCASE("abort")
        {
            check_death(crash_in(2, [] { std::abort(); }), SIGABRT, "pto::mp: SIGABRT while rank 2 ran\n");
        }
        SUBCASE("terminate")
        {
            check_death(crash_in(1, [] { std::terminate(); }), SIGABRT, "pto::mp: SIGABRT while rank 1 ran\n");
        }
        SUBCASE("a write to an unmapped page")
        {
            const Death death = crash_in(3, [] {
                // Not null: GCC may drop a store it can prove goes there.
                int* volatile nowhere = reinterpret_cast<int*>(16);
                *nowhere = 1;
            });
            check_death(death, SIGSEGV, "pto::mp: SIGSEGV (fault at 0x10) while rank 3 ran\n");
        }
    }

    TEST_CASE("the handler replaced runs as the kernel would have run it")
    {
        SUBCASE("a sent signal that was ignored stays ignored, in a rank and outside")
        {
            const Death death = in_child([] {
                signal(SIGFPE, SIG_IGN);
                mp::spawn(
                    [](int rank) {
                        if (rank == 1) raise(SIGFPE);
                    },
                    2);
                raise(SIGFPE);
                std::_Exit(7);
            });
            INFO("child stderr: " << death.stderr_text);
            REQUIRE(WIFEXITED(death.status));
            CHECK(WEXITSTATUS(death.status) == 7);
        }
        SUBCASE("SA_RESETHAND: the handler runs once, then the default")
        {
            const Death death = in_child([] {
                struct sigaction once {};
                once.sa_handler = [](int) { (void)!write(STDERR_FILENO, "handled\n", 8); };
                once.sa_flags = SA_RESETHAND;
                sigemptyset(&once.sa_mask);
                sigaction(SIGABRT, &once, nullptr);
                mp::spawn(
                    [](int rank) {
                        if (rank != 1) return;
                        raise(SIGABRT);
                        raise(SIGABRT);
                    },
                    2);
                std::_Exit(7);
            });
            INFO("child stderr: " << death.stderr_text);
            REQUIRE(WIFSIGNALED(death.status));
            CHECK(WTERMSIG(death.status) == SIGABRT);
            CHECK(death.stderr_text.find("handled\n") == death.stderr_text.rfind("handled\n"));
        }
        SUBCASE("its mask is what it asked for")
        {
            static volatile sig_atomic_t usr1_blocked = -1;
            const Death death = in_child([] {
                struct sigaction masked {};
                masked.sa_handler = [](int) {
                    sigset_t now;
                    pthread_sigmask(SIG_BLOCK, nullptr, &now);
                    usr1_blocked = sigismember(&now, SIGUSR1);
                };
                sigemptyset(&masked.sa_mask);
                sigaddset(&masked.sa_mask, SIGUSR1);
                sigaction(SIGFPE, &masked, nullptr);
                mp::spawn(
                    [](int rank) {
                        if (rank == 1) raise(SIGFPE);
                    },
                    2);
                std::_Exit(usr1_blocked == 1 ? 0 : 8);
            });
            INFO("child stderr: " << death.stderr_text);
            REQUIRE(WIFEXITED(death.status));
            CHECK(WEXITSTATUS(death.status) == 0);
        }
        SUBCASE("a handler that calls ours, installed over it between two runs, does not call round for ever")
        {
            static struct sigaction replaced {};
            const Death death = in_child([] {
                signal(SIGABRT, SIG_DFL);
                mp::spawn([](int) {}, 1);
                struct sigaction chain {};
                chain.sa_sigaction = [](int sig, siginfo_t* info, void* context) {
                    (void)!write(STDERR_FILENO, "chained\n", 8);
                    replaced.sa_sigaction(sig, info, context);
                };
                chain.sa_flags = SA_SIGINFO;
                sigemptyset(&chain.sa_mask);
                sigaction(SIGABRT, &chain, &replaced);
                mp::spawn(
                    [](int rank) {
                        if (rank == 1) std::abort();
                    },
                    2);
            });
            INFO("child stderr: " << death.stderr_text);
            REQUIRE(WIFSIGNALED(death.status));
            CHECK(WTERMSIG(death.status) == SIGABRT);
            CHECK(death.stderr_text.find("chained\n") == death.stderr_text.rfind("chained\n"));
            CHECK(mp_test::contains(death.stderr_text, "pto::mp: SIGABRT while rank 1 ran\n"));
        }
    }

    TEST_CASE("a crash outside any rank names none")
    {
        const Death death = in_child([] {
            signal(SIGABRT, SIG_DFL);
            mp::spawn([](int) { mp::barrier(); }, 2);
            std::abort();
        });
        REQUIRE(WIFSIGNALED(death.status));
        CHECK(WTERMSIG(death.status) == SIGABRT);
        CHECK_FALSE(mp_test::contains(death.stderr_text, "pto::mp:"));
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

    TEST_CASE("the handler installed before still gets the SIGSEGVs that are no overflow after a spawn")
    {
        const Death death = in_child([] {
            signal(SIGSEGV, &exit_42);
            mp::spawn([](int) {}, 2);
            raise(SIGSEGV);
        });
        INFO("child stderr: " << death.stderr_text);
        REQUIRE(WIFEXITED(death.status));
        CHECK(WEXITSTATUS(death.status) == 42);
    }

    TEST_CASE("an alternate stack of 256 KiB that the thread has is kept")
    {
        static char own_alt_stack[256 * 1024];
        stack_t mine{};
        mine.ss_sp = own_alt_stack;
        mine.ss_size = sizeof own_alt_stack;
        const Death death = in_child([&] {
            if (sigaltstack(&mine, nullptr) != 0) std::_Exit(5);
            stack_t inside{};
            mp::spawn([&](int) { sigaltstack(nullptr, &inside); }, 1);
            std::_Exit(inside.ss_sp == own_alt_stack ? 0 : 6);
        });
        REQUIRE(WIFEXITED(death.status));
        CHECK(WEXITSTATUS(death.status) == 0);
    }

    TEST_CASE("the handler and alternate stack are set up once per thread, not at every run")
    {
        // A thread of its own, so that this is its first spawn.
        struct Seen {
            void* inside = nullptr;
            void* after_first = nullptr;
            void* after_steps = nullptr;
        } seen;
        std::thread([&] {
            using namespace std::chrono_literals;
            mp::spawn([&](int) {
                stack_t alt{};
                sigaltstack(nullptr, &alt);
                seen.inside = alt.ss_sp;
            }, 1);
            stack_t alt{};
            sigaltstack(nullptr, &alt);
            seen.after_first = alt.ss_sp;
            auto context = mp::spawn([](int) { mp::yield(); }, 2, {.join = false});
            while (!context.join(0ns)) {
            }
            sigaltstack(nullptr, &alt);
            seen.after_steps = alt.ss_sp;
        }).join();
        CHECK(seen.inside != nullptr);
        CHECK(seen.after_first == seen.inside);
        CHECK(seen.after_steps == seen.inside);
    }

    TEST_CASE("a 1.25 MiB frame cannot reach the next rank's stack on 64-bit targets")
    {
        if (sizeof(void*) < 8) return;  // 32-bit guards are 64 KiB: see the frame that jumps them below
        check_rank_dies<&big_frame<1280 * 1024>>(1);
    }

    TEST_CASE("a frame that jumps the guard region and faults names the rank")
    {
#if defined(__clang__)
        // Clang has no attribute that turns the probes off for one function:
        // built with -fstack-clash-protection, big_frame is probed and stops in
        // the guard.
        MESSAGE("Clang probes every frame of this file; nothing jumps the guard");
        return;
#endif
        const std::size_t guard = mp::detail::guard_for(rank_stack);
        check_rank_dies<&big_frame<mp::detail::guard_bytes + 2 * rank_stack>>(
            1, ": a frame larger than its " + std::to_string(guard) + "-byte guard region jumped it");
    }
}
