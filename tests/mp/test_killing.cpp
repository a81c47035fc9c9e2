// How a dying spawn treats ranks that cannot, or will not, be unwound the
// ordinary way: Clang's noexcept frames, ranks that go on looping once killed,
// and suspension points reached while a rank unwinds its own exception.
#include "support.hpp"

#include <doctest/doctest.h>
#include <pto/mp.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace mp = pto::mp;
using mp_test::contains;
using mp_test::spawn_failure;

namespace {

// Built by Clang, a noexcept function that calls one that may throw has a
// catch-all landing pad that calls std::terminate; GCC gives it none.
__attribute__((noinline)) void barrier_noexcept() noexcept
{
    mp::barrier();
}

// The same with a local object, whose destructor that pad runs first.
__attribute__((noinline)) void barrier_noexcept_with_cleanup(int& destroyed) noexcept
{
    const mp_test::Tracked tracked(destroyed);
    mp::barrier();
}

// The C++ form of `finally: dist.barrier()`.
struct SyncOnExit {
    ~SyncOnExit() { mp::barrier(); }
};

// Runs a spawn whose killed rank may loop for ever in a child, where the
// stack it leaves behind cannot trouble the leak checker: what() of the
// SpawnError, or how the child died.
std::string failure_in_child(const std::function<void(int)>& fn, int nprocs)
{
    const mp_test::Death death = mp_test::in_child([&] {
        const std::string what = spawn_failure(fn, nprocs);
        std::fputs(what.c_str(), stderr);
    });
    if (!WIFEXITED(death.status) || WEXITSTATUS(death.status) != 0)
        return "child died with status " + std::to_string(death.status) + ": " + death.stderr_text;
    return death.stderr_text;
}

}  // namespace

TEST_SUITE("mp.failure")
{
    TEST_CASE("a noexcept frame that Clang gives a terminate pad is not thrown into")
    {
        bool returned = false;
        CHECK(spawn_failure(
                  [&](int rank) {
                      if (rank == 1) {
                          mp::yield();
                          throw std::runtime_error("rank 1 failed");
                      }
                      barrier_noexcept();
                      returned = mp::is_being_killed();
                  },
                  2) == "spawn failed on ranks [1]: rank 1 raised rank 1 failed");
        CHECK(returned);
        int destroyed = 0;
        CHECK(spawn_failure(
                  [&](int rank) {
                      if (rank == 1) {
                          mp::yield();
                          throw std::runtime_error("rank 1 failed");
                      }
                      barrier_noexcept_with_cleanup(destroyed);
                  },
                  2) == "spawn failed on ranks [1]: rank 1 raised rank 1 failed");
        CHECK(destroyed == 1);
    }

    TEST_CASE("a killed rank whose destructor yields for ever is left, named, and the spawn ends")
    {
        struct WaitForPeer {
            const bool& peer_done;
            ~WaitForPeer()
            {
                while (!peer_done) mp::yield();
            }
        };
        const bool peer_done = false;
        // Rank 2 throws in the first round, after ranks 0 and 1 reached the barrier.
        const std::string what = failure_in_child(
            [&](int rank) {
                if (rank == 2) throw std::runtime_error("rank 2 failed");
                const WaitForPeer wait{peer_done};
                mp::barrier();
            },
            3);
        INFO(what);
        CHECK(contains(what, "spawn failed on ranks [2]: rank 2 raised rank 2 failed"));
        CHECK(contains(what, "rank 0 would not stop"));
        CHECK(contains(what, "yield()"));
        CHECK(contains(what, "rank 1 would not stop"));
    }

    TEST_CASE("a killed rank that retries a swallowed suspension point for ever is left, named")
    {
        const std::string what = failure_in_child(
            [](int rank) {
                if (rank == 1) {
                    mp::yield();
                    throw std::runtime_error("rank 1 failed");
                }
                for (;;) {
                    try {
                        mp::barrier();
                        break;
                    } catch (...) {
                    }
                }
            },
            2);
        INFO(what);
        CHECK(contains(what, "spawn failed on ranks [1]: rank 1 raised rank 1 failed"));
        CHECK(contains(what, "rank 0 would not stop"));
        CHECK(contains(what, "barrier()"));
        CHECK_FALSE(contains(what, "rank 1 would not stop"));
    }

    TEST_CASE("a barrier in a destructor while its rank unwinds, beside another collective, is not thrown into")
    {
        int reduced[3] = {};
        CHECK(spawn_failure(
                  [&](int rank) {
                      const SyncOnExit sync;
                      if (rank == 1) {
                          mp::yield();
                          throw std::runtime_error("rank 1 failed");
                      }
                      int v[1] = {rank};
                      mp::all_reduce(std::span(v));
                      reduced[rank] = 1;
                  },
                  3) == "spawn failed on ranks [1]: rank 1 raised rank 1 failed");
        CHECK(reduced[0] == 0);
        CHECK(reduced[2] == 0);
    }

    TEST_CASE("a barrier in a destructor while its rank unwinds keeps that rank the root cause, whoever comes last")
    {
        const auto run = [](bool unwinding_first, bool peers_yield) {
            return spawn_failure(
                [=](int rank) {
                    const SyncOnExit sync;
                    if (rank == 1) {
                        if (!unwinding_first) mp::yield();
                        throw std::runtime_error("rank 1 failed");
                    }
                    if (peers_yield) mp::yield();
                    int v[1] = {rank};
                    mp::all_reduce(std::span(v));
                },
                3);
        };
        // Rank 1's barrier waits beside rank 0's all_reduce, rank 2 comes last.
        CHECK(run(true, false) == "spawn failed on ranks [1]: rank 1 raised rank 1 failed");
        // Rank 1's barrier is the open call; ranks 0 and 2 come after it.
        CHECK(run(true, true) == "spawn failed on ranks [1]: rank 1 raised rank 1 failed");
        // Rank 1 comes last (the case above).
        CHECK(run(false, false) == "spawn failed on ranks [1]: rank 1 raised rank 1 failed");
    }

    TEST_CASE("ranks that unwind into a barrier are no majority: however many, the first one's exception is the root cause")
    {
        for (const int throwing : {2, 3, 4}) {
            CAPTURE(throwing);
            CHECK(spawn_failure(
                      [=](int rank) {
                          const SyncOnExit sync;
                          if (rank < throwing) throw std::runtime_error("rank " + std::to_string(rank) + " failed");
                          int v[1] = {rank};
                          mp::all_reduce(std::span(v));
                      },
                      5) == "spawn failed on ranks [0]: rank 0 raised rank 0 failed");
        }
        // Ranks 0 and 2 of 4 throw: a tie between the calls, not between
        // the ranks that mean them.
        CHECK(spawn_failure(
                  [](int rank) {
                      const SyncOnExit sync;
                      if (rank % 2 == 0) throw std::runtime_error("rank " + std::to_string(rank) + " failed");
                      int v[1] = {rank};
                      mp::all_reduce(std::span(v));
                  },
                  4) == "spawn failed on ranks [0]: rank 0 raised rank 0 failed");
    }

    TEST_CASE("a call that waits unlike an open one taken back from ranks that unwind goes on with it")
    {
        // Ranks 1 and 2 unwind into a barrier, the open call; ranks 0, 3 and
        // 4 reduce. Taken back, the barrier leaves the reduction to ranks 0, 3
        // and 4, which cannot complete it without 1 and 2: the spawn ends
        // with rank 1's exception, the first to leave a rank.
        std::vector<int> reduced(5, 0);
        CHECK(spawn_failure(
                  [&](int rank) {
                      const SyncOnExit sync;
                      if (rank == 1 || rank == 2) throw std::runtime_error("rank " + std::to_string(rank) + " failed");
                      mp::yield();
                      int v[1] = {rank};
                      mp::all_reduce(std::span(v));
                      reduced[static_cast<std::size_t>(rank)] = 1;
                  },
                  5) == "spawn failed on ranks [1]: rank 1 raised rank 1 failed");
        CHECK(reduced == std::vector<int>(5, 0));
    }

    TEST_CASE("a shared buffer found by a rank that unwinds keeps that rank the root cause")
    {
        int shared[1] = {};
        struct ReduceOnExit {
            ~ReduceOnExit()
            {
                int own[1] = {1};
                mp::all_reduce(std::span(own));
            }
        };
        CHECK(spawn_failure(
                  [&](int rank) {
                      if (rank == 1) {
                          const ReduceOnExit reduce;
                          mp::yield();
                          throw std::runtime_error("rank 1 failed");
                      }
                      mp::all_reduce(std::span(shared));
                  },
                  3) == "spawn failed on ranks [1]: rank 1 raised rank 1 failed");
    }

    TEST_CASE("a collective refused while a rank unwinds is the error when the rank catches its exception")
    {
        std::vector<bool> killed(2, false);
        CHECK(spawn_failure(
                  [&](int rank) {
                      if (rank == 1) {
                          try {
                              const SyncOnExit sync;
                              mp::yield();
                              throw std::runtime_error("caught in the rank");
                          } catch (const std::runtime_error&) {
                          }
                          killed[1] = mp::is_being_killed();
                          return;
                      }
                      int v[1] = {rank};
                      mp::all_reduce(std::span(v));
                  },
                  2) == "spawn failed on ranks [1]: rank 1 raised mismatched collectives at step 1: rank 0 called "
                        "all_reduce(1 x int, sum), rank 1 called barrier");
        CHECK(killed[1]);
    }
}
