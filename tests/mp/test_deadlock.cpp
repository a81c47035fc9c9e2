#include "support.hpp"

#include <doctest/doctest.h>
#include <pto/mp.hpp>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

namespace mp = pto::mp;
using mp_test::Tracked;

namespace {

// what() of the DeadlockError a spawn throws; checks that errors() is empty.
std::string deadlock(std::function<void(int)> fn, int nprocs)
{
    try {
        mp::spawn(std::move(fn), nprocs);
    } catch (const mp::DeadlockError& e) {
        CHECK(e.errors().empty());
        return e.what();
    }
    return "";
}

}  // namespace

TEST_SUITE("mp.deadlock")
{
    TEST_CASE("a barrier a returned rank never reaches: each blocked rank and what it waits on")
    {
        int destroyed = 0;
        const std::string message = deadlock(
            [&](int rank) {
                Tracked guard(destroyed);
                for (int i = 0; i < (rank == 3 ? 4 : 5); ++i) mp::barrier();
            },
            4);
        CHECK(message == "spawn deadlocked: 3 of 4 ranks blocked, none can proceed\n"
                         "  rank 0: barrier #5 (3 of 4 arrived)\n"
                         "  rank 1: barrier #5 (3 of 4 arrived)\n"
                         "  rank 2: barrier #5 (3 of 4 arrived)\n"
                         "  rank 3: returned");
        CHECK(destroyed == 4);
    }

    TEST_CASE("DeadlockError is a SpawnError")
    {
        CHECK_THROWS_AS(mp::spawn([](int rank) { if (rank == 0) mp::barrier(); }, 2), mp::SpawnError);
    }

    TEST_CASE("many ranks are folded into ranges")
    {
        const std::string message = deadlock(
            [](int rank) {
                if (rank == 10 || rank >= 50) return;
                int v[4] = {};
                mp::all_reduce(std::span(v), mp::ReduceOp::max);
            },
            100);
        CHECK(message == "spawn deadlocked: 49 of 100 ranks blocked, none can proceed\n"
                         "  ranks 0-9,11-49: all_reduce #1 (4 x int, max; 49 of 100 arrived)\n"
                         "  ranks 10,50-99: returned");
    }

    TEST_CASE("send/recv waits name the peer")
    {
        SUBCASE("every rank sends first")
        {
            CHECK(deadlock(
                      [](int rank) {
                          int v[1] = {rank};
                          mp::send(std::span(v), (rank + 1) % 3);
                          mp::recv(std::span(v), (rank + 2) % 3);
                      },
                      3) == "spawn deadlocked: 3 of 3 ranks blocked, none can proceed\n"
                            "  rank 0: send(1 x int) to rank 1\n"
                            "  rank 1: send(1 x int) to rank 2\n"
                            "  rank 2: send(1 x int) to rank 0");
        }
        SUBCASE("the peer has returned")
        {
            CHECK(deadlock(
                      [](int rank) {
                          double v[2] = {};
                          if (rank == 1) mp::recv(std::span(v), 0);
                      },
                      2) == "spawn deadlocked: 1 of 2 ranks blocked, none can proceed\n"
                            "  rank 0: returned\n"
                            "  rank 1: recv(2 x double) from rank 0 (rank 0 has returned)");
        }
    }

    TEST_CASE("a report of many distinct waits is capped, the rest counted")
    {
        const int n = 10000;
        const std::string message = deadlock(
            [](int rank) {
                int v[1] = {};
                mp::recv(std::span(v), (rank + n - 1) % n);
            },
            n);
        CHECK(std::count(message.begin(), message.end(), '\n') == 21);
        CHECK(mp_test::contains(message, "\n  rank 0: recv(1 x int) from rank 9999\n"));
        CHECK(mp_test::contains(message, "\n  rank 19: recv(1 x int) from rank 18\n"));
        CHECK(mp_test::contains(message, "\n  and 9980 more ranks in 9980 other states"));
    }

    TEST_CASE("ranks blocked on different things get a line each")
    {
        CHECK(deadlock(
                  [](int rank) {
                      int v[1] = {};
                      if (rank == 0) mp::recv(std::span(v), 1);
                      if (rank == 1) (void)mp::all_gather(rank);
                  },
                  3) == "spawn deadlocked: 2 of 3 ranks blocked, none can proceed\n"
                        "  rank 0: recv(1 x int) from rank 1\n"
                        "  rank 1: all_gather #1 (int; 1 of 3 arrived)\n"
                        "  rank 2: returned");
    }

    TEST_CASE("an exception a rank was unwinding when the spawn deadlocked is kept and shown")
    {
        struct SyncOnExit {
            ~SyncOnExit() { mp::barrier(); }
        };
        try {
            mp::spawn(
                [](int rank) {
                    const SyncOnExit sync;
                    if (rank == 1) throw std::runtime_error("the real error");
                    int v[1] = {};
                    mp::recv(std::span(v), 1);
                },
                2);
            FAIL("spawn did not throw");
        } catch (const mp::DeadlockError& e) {
            CHECK(std::string(e.what()) == "spawn deadlocked: 2 of 2 ranks blocked, none can proceed\n"
                                           "  rank 0: recv(1 x int) from rank 1\n"
                                           "  rank 1: barrier #1 (1 of 2 arrived)\n"
                                           "  rank 1 was unwinding the real error when it blocked");
            REQUIRE(e.errors().count(1) == 1);
            CHECK(e.error_index() == 1);
            CHECK_THROWS_WITH_AS(std::rethrow_exception(e.errors().at(1)), "the real error", std::runtime_error);
        }
    }

    TEST_CASE("a rank that only yields while another is blocked is a deadlock that names it")
    {
        bool never = false;
        std::string message;
        try {
            mp::spawn(
                [&](int rank) {
                    if (rank == 1) mp::barrier();
                    while (!never) mp::yield();
                },
                3, {.yield_only_rounds = 1000, .yield_only_time = std::chrono::nanoseconds(0)});
            FAIL("spawn did not throw");
        } catch (const mp::DeadlockError& e) {
            message = e.what();
        }
        CHECK(message ==
              "spawn deadlocked: ranks 0,2 only yielded for 1000 rounds while 1 of 3 ranks stayed blocked\n"
              "  rank 0: yield() only, for 1000 rounds\n"
              "  rank 1: barrier #1 (1 of 3 arrived)\n"
              "  rank 2: yield() only, for 1000 rounds\n"
              "  (a longer spin needs a larger SpawnOptions::yield_only_rounds or yield_only_time; 0 rounds never "
              "gives up)");
    }

    TEST_CASE("a rank that only yields while the others have returned is a deadlock that names it")
    {
        bool never = false;
        CHECK(mp_test::spawn_failure(
                  [&](int rank) {
                      if (rank == 0)
                          while (!never) mp::yield();
                  },
                  2, {.yield_only_rounds = 1000, .yield_only_time = std::chrono::nanoseconds(0)}) ==
              "spawn deadlocked: rank 0 only yielded for 1000 rounds while 1 of 2 ranks had returned\n"
              "  rank 0: yield() only, for 1000 rounds\n"
              "  rank 1: returned\n"
              "  (a longer spin needs a larger SpawnOptions::yield_only_rounds or yield_only_time; 0 rounds never "
              "gives up)");
    }

    TEST_CASE("ranks that all only yield, each waiting for another, are a deadlock")
    {
        std::vector<bool> done(2, false);
        CHECK(mp_test::spawn_failure(
                  [&](int rank) {
                      while (!done[static_cast<std::size_t>(1 - rank)]) mp::yield();
                      done[static_cast<std::size_t>(rank)] = true;
                  },
                  2, {.yield_only_rounds = 1000, .yield_only_time = std::chrono::nanoseconds(0)}) ==
              "spawn deadlocked: ranks 0-1 only yielded for 1000 rounds\n"
              "  rank 0: yield() only, for 1000 rounds\n"
              "  rank 1: yield() only, for 1000 rounds\n"
              "  (a longer spin needs a larger SpawnOptions::yield_only_rounds or yield_only_time; 0 rounds never "
              "gives up)");
    }

    TEST_CASE("a spin is no deadlock before its time is up, however many rounds it takes")
    {
        // 1,500 rounds of yields after the peer returned: past the rounds,
        // well within the default time.
        int yields = 0;
        mp::spawn(
            [&](int rank) {
                if (rank == 0)
                    for (; yields < 1500; ++yields) mp::yield();
            },
            2, {.yield_only_rounds = 1000});
        CHECK(yields == 1500);
    }

    TEST_CASE("yielding through a long computation while others wait is no deadlock")
    {
        // Each round the computing rank only yields; the count restarts when
        // a round does anything else.
        for (const std::size_t limit : {std::size_t{0}, std::size_t{100}}) {
            int computed = 0;
            mp::spawn(
                [&](int rank) {
                    if (rank == 0) {
                        for (int step = 0; step < 5000; ++step) {
                            ++computed;
                            mp::yield();
                            if (limit != 0 && step % 50 == 49) {
                                int v[1] = {step};
                                mp::send(std::span(v), 2);
                            }
                        }
                    }
                    if (rank == 2 && limit != 0)
                        for (int i = 0; i < 100; ++i) {
                            int v[1];
                            mp::recv(std::span(v), 0);
                        }
                    mp::barrier();
                },
                3, {.yield_only_rounds = limit});
            CHECK(computed == 5000);
        }
        // And with the default limit, without any other progress.
        int computed = 0;
        mp::spawn(
            [&](int rank) {
                if (rank == 0)
                    for (int step = 0; step < 10'000; ++step, ++computed) mp::yield();
                mp::barrier();
            },
            2);
        CHECK(computed == 10'000);
    }
}
