#include "support.hpp"

#include <doctest/doctest.h>
#include <pto/mp.hpp>

#include "mp/stack.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <cfenv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace mp = pto::mp;
using mp_test::Tracked;

TEST_SUITE("mp.spawn")
{
    TEST_CASE("every rank runs fn once with its rank and the world size")
    {
        std::vector<int> calls(5, 0);
        std::vector<int> sizes;
        mp::spawn(
            [&](int rank) {
                CHECK(mp::get_rank() == rank);
                ++calls.at(static_cast<std::size_t>(rank));
                sizes.push_back(mp::get_world_size());
            },
            5);
        CHECK(calls == std::vector<int>(5, 1));
        CHECK(sizes == std::vector<int>(5, 5));
    }

    TEST_CASE("ranks take turns round-robin in rank order")
    {
        std::vector<int> log;
        mp::spawn(
            [&](int rank) {
                for (int step = 0; step < 3; ++step) {
                    log.push_back(rank * 10 + step);
                    mp::yield();
                }
            },
            3);
        CHECK(log == std::vector<int>{0, 10, 20, 1, 11, 21, 2, 12, 22});
    }

    TEST_CASE("a rank that returns early leaves the others running")
    {
        std::vector<int> log;
        mp::spawn(
            [&](int rank) {
                for (int step = 0; step <= rank; ++step) {
                    log.push_back(rank * 10 + step);
                    mp::yield();
                }
            },
            3);
        CHECK(log == std::vector<int>{0, 10, 20, 11, 21, 22});
    }

    TEST_CASE("the args overload gives each rank its own copy of the arguments")
    {
        std::vector<std::string> seen(3);
        mp::spawn(
            [&](int rank, std::string& prefix, int& count) {
                prefix += std::to_string(rank);
                ++count;
                mp::yield();
                seen.at(static_cast<std::size_t>(rank)) = prefix + "/" + std::to_string(count);
            },
            std::tuple{std::string("r"), 41}, 3);
        CHECK(seen == std::vector<std::string>{"r0/42", "r1/42", "r2/42"});
    }

    TEST_CASE("join=false runs nothing until join(), and join() twice is harmless")
    {
        int runs = 0;
        auto context = mp::spawn(
            [&](int) {
                mp::barrier();
                ++runs;
            },
            3, {.join = false});
        CHECK(runs == 0);
        context.join();
        CHECK(runs == 3);
        context.join();
        CHECK(runs == 3);
    }

    TEST_CASE("join=false: join() reports a failure like spawn does")
    {
        auto context = mp::spawn(
            [](int rank) {
                if (rank == 1) throw std::runtime_error("late");
            },
            2, {.join = false});
        CHECK_THROWS_WITH_AS(context.join(), "spawn failed on ranks [1]: rank 1 raised late", mp::SpawnError);
        CHECK_NOTHROW(context.join());
    }

    TEST_CASE("an unjoined context that is destroyed runs no rank")
    {
        int runs = 0;
        {
            auto context = mp::spawn([&](int) { ++runs; }, 4, {.join = false});
        }
        CHECK(runs == 0);
    }

    TEST_CASE("contexts are independent: each has its own ranks and collectives")
    {
        std::vector<int> sums;
        auto first = mp::spawn(
            [&](int rank) {
                int v[1] = {rank};
                mp::all_reduce(std::span(v));
                sums.push_back(v[0]);
            },
            2, {.join = false});
        auto second = mp::spawn(
            [&](int rank) {
                int v[1] = {rank};
                mp::all_reduce(std::span(v));
                sums.push_back(v[0]);
            },
            3, {.join = false});
        second.join();
        first.join();
        CHECK(sums == std::vector<int>{3, 3, 3, 1, 1});
    }

    TEST_CASE("the in-rank functions throw std::logic_error outside a rank")
    {
        int data[2] = {1, 2};
        CHECK_THROWS_AS(mp::get_rank(), std::logic_error);
        CHECK_THROWS_WITH(mp::get_rank(), "pto::mp::get_rank() called outside a rank");
        CHECK_THROWS_AS(mp::get_world_size(), std::logic_error);
        CHECK_THROWS_AS(mp::yield(), std::logic_error);
        CHECK_THROWS_AS(mp::barrier(), std::logic_error);
        CHECK_THROWS_AS(mp::all_reduce(std::span(data)), std::logic_error);
        CHECK_THROWS_AS(mp::broadcast(std::span(data), 0), std::logic_error);
        CHECK_THROWS_AS(mp::all_gather(1), std::logic_error);
        CHECK_THROWS_AS(mp::send(std::span(data), 1), std::logic_error);
        CHECK_THROWS_AS(mp::recv(std::span(data), 1), std::logic_error);
    }

    TEST_CASE("spawn and join inside a rank throw std::logic_error")
    {
        auto outer = mp::spawn([](int) {}, 1, {.join = false});
        int refused = 0;
        std::string spawn_refusal, join_refusal;
        mp::spawn(
            [&](int) {
                try {
                    mp::spawn([](int) {}, 1);
                } catch (const std::logic_error& e) {
                    ++refused;
                    spawn_refusal = e.what();
                }
                try {
                    outer.join();
                } catch (const std::logic_error& e) {
                    ++refused;
                    join_refusal = e.what();
                }
            },
            2);
        CHECK(refused == 4);
        CHECK(spawn_refusal == "pto::mp::spawn() called inside a rank; ranks cannot spawn ranks");
        CHECK(join_refusal == "pto::mp::SpawnContext::join() called inside a rank; a context is joined outside its "
                              "ranks, on its spawning thread");
        CHECK_NOTHROW(outer.join());
    }

    TEST_CASE("a part-run context destroyed inside a rank of another spawn leaves that rank running")
    {
        using namespace std::chrono_literals;
        auto inner = mp::spawn([](int) { for (;;) mp::yield(); }, 2, {.join = false, .yield_only_rounds = 0});
        CHECK_FALSE(inner.join(0ns));
        int rank_after = -1;
        mp::spawn(
            [&](int rank) {
                if (rank != 1) return;
                { const mp::SpawnContext dying = std::move(inner); }
                rank_after = mp::get_rank();
                mp::yield();
            },
            2);
        CHECK(rank_after == 1);
    }

    TEST_CASE("a rank that destroys its own spawn's context is stopped with a message")
    {
        const mp_test::Death death = mp_test::in_child([] {
            signal(SIGABRT, SIG_DFL);  // doctest's handler would report a crash of its own
            std::optional<mp::SpawnContext> context;
            context = mp::spawn(
                [&](int rank) {
                    if (rank == 1) context.reset();
                },
                2, {.join = false});
            context->join();
        });
        INFO("child stderr: " << death.stderr_text);
        REQUIRE(WIFSIGNALED(death.status));
        CHECK(WTERMSIG(death.status) == SIGABRT);
        CHECK(mp_test::contains(death.stderr_text,
                                "pto::mp: a rank destroyed (or moved over) the SpawnContext of its own spawn"));
    }

    TEST_CASE("bad arguments are std::invalid_argument")
    {
        CHECK_THROWS_AS(mp::spawn([](int) {}, -1), std::invalid_argument);
        CHECK_THROWS_AS(mp::spawn(std::function<void(int)>(), 2), std::invalid_argument);
        CHECK_THROWS_AS(mp::spawn([](int) {}, 2, {.stack_bytes = 4096}), std::invalid_argument);
    }

    TEST_CASE("a stack size that wraps when rounded up, or with the guard, is std::invalid_argument")
    {
        const std::size_t page = mp::detail::page_size();
        const std::size_t guard = mp::detail::guard_bytes;
        for (const std::size_t bytes : {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - page, SIZE_MAX - guard + 1}) {
            INFO(bytes);
            CHECK_THROWS_WITH_AS(mp::spawn([](int) {}, 1, {.stack_bytes = bytes}),
                                 ("pto::mp::spawn: stack_bytes is " + std::to_string(bytes) +
                                  ", more than any address space holds")
                                     .c_str(),
                                 std::invalid_argument);
        }
    }

    TEST_CASE("zero ranks is an empty spawn")
    {
        int runs = 0;
        mp::spawn([&](int) { ++runs; }, 0);
        CHECK(runs == 0);
    }

    TEST_CASE("stacks have a guard region right below them, as large as promised")
    {
        // The stack pointer is in a read-write mapping whose lower neighbour
        // is an inaccessible region of guard_bytes or more.
        std::string below;
        std::uintptr_t below_size = 0;
        mp::spawn(
            [&](int) {
                const auto here = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
                FILE* maps = std::fopen("/proc/self/maps", "r");
                REQUIRE(maps != nullptr);
                char line[512];
                std::uintptr_t previous_start = 0, previous_end = 0;
                std::string previous_perms;
                while (std::fgets(line, sizeof line, maps) != nullptr) {
                    unsigned long start = 0, end = 0;
                    char perms[8] = {};
                    if (std::sscanf(line, "%lx-%lx %7s", &start, &end, perms) != 3) continue;
                    if (here >= start && here < end) {
                        if (previous_end == start) {
                            below = previous_perms;
                            below_size = previous_end - previous_start;
                        }
                        break;
                    }
                    previous_start = start;
                    previous_end = end;
                    previous_perms = perms;
                }
                std::fclose(maps);
            },
            1, {.stack_bytes = 64 * 1024});
        CHECK(below == "---p");
        CHECK(below_size >= mp::detail::guard_bytes);
    }

    TEST_CASE("each rank keeps its own floating-point rounding mode")
    {
        std::vector<int> modes(2);
        mp::spawn(
            [&](int rank) {
                if (rank == 0) std::fesetround(FE_UPWARD);
                mp::yield();
                modes[static_cast<std::size_t>(rank)] = std::fegetround();
                std::fesetround(FE_TONEAREST);
            },
            2);
        CHECK(modes == std::vector<int>{FE_UPWARD, FE_TONEAREST});
        CHECK(std::fegetround() == FE_TONEAREST);
    }

    TEST_CASE("each rank keeps its own floating-point exception flags")
    {
        volatile double zero = 0.0;
        std::feclearexcept(FE_ALL_EXCEPT);
        volatile double infinite = 1.0 / zero;
        const bool flags_work = std::fetestexcept(FE_DIVBYZERO) != 0;
        std::feclearexcept(FE_ALL_EXCEPT);
        if (!flags_work) {
            // valgrind does not emulate the flags; nothing to compare then.
            MESSAGE("this CPU or emulator raises no floating-point flags; nothing to check");
            return;
        }
        std::vector<int> raised(2, -1);
        mp::spawn(
            [&](int rank) {
                if (rank == 0) infinite = 1.0 / zero;
                mp::yield();
                raised[static_cast<std::size_t>(rank)] = std::fetestexcept(FE_DIVBYZERO) != 0;
            },
            2);
        CHECK(raised == std::vector<int>{1, 0});
        CHECK(std::fetestexcept(FE_DIVBYZERO) == 0);
    }

    TEST_CASE("x87 exception flags stay with the rank that raised them, and ranks start without any")
    {
        volatile long double zero = 0.0L;
        std::feclearexcept(FE_ALL_EXCEPT);
        volatile long double infinite = 1.0L / zero;
        const bool flags_work = std::fetestexcept(FE_DIVBYZERO) != 0;
        std::feclearexcept(FE_ALL_EXCEPT);
        if (!flags_work) {
            MESSAGE("this CPU or emulator raises no floating-point flags; nothing to check");
            return;
        }
        std::vector<int> raised(3, -1);
        std::vector<int> at_start(3, -1);
        // The spawner's own flags are not the ranks'.
        volatile double one = 1.0, three = 3.0;
        volatile double third = one / three;
        static_cast<void>(third);
        REQUIRE(std::fetestexcept(FE_INEXACT) != 0);
        mp::spawn(
            [&](int rank) {
                at_start[static_cast<std::size_t>(rank)] = std::fetestexcept(FE_ALL_EXCEPT);
                if (rank == 0) infinite = 1.0L / zero;
                mp::yield();
                raised[static_cast<std::size_t>(rank)] = std::fetestexcept(FE_DIVBYZERO) != 0;
            },
            3);
        CHECK(raised == std::vector<int>{1, 0, 0});
        CHECK(at_start == std::vector<int>(3, 0));
        CHECK(std::fetestexcept(FE_DIVBYZERO) == 0);
        CHECK(std::fetestexcept(FE_INEXACT) != 0);
        std::feclearexcept(FE_ALL_EXCEPT);
    }

    TEST_CASE("each rank runs its own copy of fn, as each process has its own")
    {
        std::vector<int> seen(3, -1);
        mp::spawn(
            [&seen, calls = 0](int rank) mutable {
                ++calls;
                mp::yield();
                seen[static_cast<std::size_t>(rank)] = calls;
            },
            3);
        CHECK(seen == std::vector<int>(3, 1));
    }

    TEST_CASE("join() with the largest timeout waits for the end")
    {
        auto context = mp::spawn(
            [](int) {
                for (int i = 0; i < 3; ++i) mp::yield();
            },
            2, {.join = false});
        CHECK(context.join(std::chrono::nanoseconds::max()));
    }

    TEST_CASE("a context is joined on the thread that spawned it")
    {
        int runs = 0;
        auto context = mp::spawn([&](int) { ++runs; }, 2, {.join = false});
        std::string refused;
        std::thread([&] {
            try {
                context.join();
            } catch (const std::logic_error& e) {
                refused = e.what();
            }
        }).join();
        CHECK(refused == "pto::mp::SpawnContext::join() called on a thread other than the one that spawned it; a "
                         "context is joined on its spawning thread");
        CHECK(runs == 0);
        context.join();
        CHECK(runs == 2);
    }

    TEST_CASE("join(timeout) runs whole rounds until the ranks end or the time is spent")
    {
        using namespace std::chrono_literals;
        std::vector<int> steps(3, 0);
        int destroyed = 0;
        auto context = mp::spawn(
            [&](int rank) {
                const Tracked object(destroyed);
                for (int step = 0; step < 50; ++step) {
                    ++steps[static_cast<std::size_t>(rank)];
                    mp::yield();
                }
            },
            3, {.join = false});
        CHECK(steps == std::vector<int>(3, 0));
        // A spent budget still runs one round, so that polling progresses.
        CHECK_FALSE(context.join(0ns));
        CHECK(steps == std::vector<int>(3, 1));
        CHECK_FALSE(context.join(0ns));
        CHECK(steps == std::vector<int>(3, 2));
        int calls = 2;
        while (!context.join(0ns)) ++calls;
        CHECK(calls == 50);
        CHECK(steps == std::vector<int>(3, 50));
        CHECK(destroyed == 3);
        CHECK(context.join(1s));
        CHECK_NOTHROW(context.join());
    }

    TEST_CASE("join(timeout) reports failures as join() does; a context left part-run unwinds its ranks")
    {
        using namespace std::chrono_literals;
        auto failing = mp::spawn(
            [](int rank) {
                mp::yield();
                if (rank == 1) throw std::runtime_error("late");
            },
            2, {.join = false});
        CHECK_FALSE(failing.join(0ns));
        CHECK_THROWS_WITH_AS(failing.join(0ns), "spawn failed on ranks [1]: rank 1 raised late", mp::SpawnError);
        CHECK(failing.join(0ns));

        int destroyed = 0;
        {
            auto part_run = mp::spawn(
                [&](int) {
                    const Tracked object(destroyed);
                    for (;;) mp::yield();
                },
                2, {.join = false, .yield_only_rounds = 0});
            CHECK_FALSE(part_run.join(1ms));
            CHECK(destroyed == 0);
        }
        CHECK(destroyed == 2);
    }

    TEST_CASE("ranks run in a thread whose exception state is the spawner's own")
    {
        // spawn called inside a catch block and from a destructor during
        // unwinding: the ranks see neither, and the spawner keeps both.
        std::vector<int> uncaught;
        std::vector<bool> had_current;
        const auto body = [&](int) {
            mp::yield();
            uncaught.push_back(std::uncaught_exceptions());
            had_current.push_back(std::current_exception() != nullptr);
        };
        std::string rethrown;
        try {
            throw std::runtime_error("spawner's own");
        } catch (...) {
            mp::spawn(body, 2);
            try {
                throw;
            } catch (const std::runtime_error& e) {
                rethrown = e.what();
            }
        }
        CHECK(rethrown == "spawner's own");

        struct SpawnsWhileUnwinding {
            std::function<void(int)> body;
            int uncaught_after = -1;
            ~SpawnsWhileUnwinding()
            {
                mp::spawn(body, 2);
                uncaught_after = std::uncaught_exceptions();
                CHECK(uncaught_after == 1);
            }
        };
        try {
            SpawnsWhileUnwinding spawner{body};
            throw 7;
        } catch (int) {
        }
        CHECK(uncaught == std::vector<int>(4, 0));
        CHECK(had_current == std::vector<bool>(4, false));
    }
}
