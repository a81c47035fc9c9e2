#include "support.hpp"

#include <doctest/doctest.h>
#include <pto/mp.hpp>

#include <pthread.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace mp = pto::mp;
using mp_test::spawn_failure;
using mp_test::Tracked;

namespace {

// What the thread of the pthread_exit case saw.
struct ExitingThread {
    int rank_destroyed = 0;     // objects on the stacks of the ranks
    int spawner_destroyed = 0;  // on the spawning thread's own stack
    int after_spawn = 0;        // code after spawn that ran
};

void* spawn_then_exit(void* arg)
{
    auto& seen = *static_cast<ExitingThread*>(arg);
    const Tracked spawner_object(seen.spawner_destroyed);
    mp::spawn(
        [&](int rank) {
            const Tracked rank_object(seen.rank_destroyed);
            if (rank == 1) {
                mp::yield();
                pthread_exit(reinterpret_cast<void*>(std::intptr_t{42}));
            }
            mp::barrier();
        },
        3);
    ++seen.after_spawn;
    return nullptr;
}

}  // namespace

TEST_SUITE("mp.failure")
{
    TEST_CASE("the first rank that throws ends the spawn at once")
    {
        std::vector<int> steps(4, 0);
        try {
            mp::spawn(
                [&](int rank) {
                    for (int step = 1; step <= 100; ++step) {
                        steps[static_cast<std::size_t>(rank)] = step;
                        if (rank == 1 && step == 2) throw std::runtime_error("boom");
                        mp::yield();
                    }
                },
                4);
            FAIL("spawn did not throw");
        } catch (const mp::SpawnError& e) {
            CHECK(std::string(e.what()) == "spawn failed on ranks [1]: rank 1 raised boom");
            REQUIRE(e.errors().size() == 1);
            REQUIRE(e.errors().count(1) == 1);
            CHECK_THROWS_WITH_AS(std::rethrow_exception(e.errors().at(1)), "boom", std::runtime_error);
        }
        // Ranks 2 and 3 do not get their second turn.
        CHECK(steps == std::vector<int>{2, 2, 1, 1});
    }

    TEST_CASE("SpawnError is a std::runtime_error")
    {
        CHECK_THROWS_AS(mp::spawn([](int) { throw std::logic_error("x"); }, 1), std::runtime_error);
    }

    TEST_CASE("an exception that is not a std::exception is named by its type")
    {
        CHECK(spawn_failure([](int rank) { if (rank == 0) throw 42; }, 2) ==
              "spawn failed on ranks [0]: rank 0 raised an exception of type int");
    }

    TEST_CASE("every started rank is unwound; ranks that never started do not run")
    {
        int destroyed = 0;
        int started = 0;
        SUBCASE("failure in the first round, before the later ranks start")
        {
            spawn_failure(
                [&](int rank) {
                    ++started;
                    Tracked guard(destroyed);
                    if (rank == 2) throw std::runtime_error("early");
                    mp::barrier();
                },
                6);
            CHECK(started == 3);
            CHECK(destroyed == 3);
        }
        SUBCASE("failure while the others wait in a barrier, a collective and send/recv")
        {
            spawn_failure(
                [&](int rank) {
                    ++started;
                    Tracked guard(destroyed);
                    int v[2] = {rank, rank};
                    mp::barrier();
                    switch (rank) {
                    case 0: mp::barrier(); break;
                    case 1: mp::send(std::span(v), 2); break;
                    case 2: mp::yield(); break;
                    case 3: throw std::runtime_error("late");
                    default: mp::all_reduce(std::span(v)); break;
                    }
                    Tracked never(destroyed);  // not reached: 1000 would show it
                    destroyed += 1000;
                },
                6);
            CHECK(started == 6);
            CHECK(destroyed == 6);
        }
    }

    TEST_CASE("catch (const std::exception&) in a sibling does not stop its unwinding")
    {
        bool caught = false;
        bool went_on = false;
        int destroyed = 0;
        spawn_failure(
            [&](int rank) {
                if (rank == 1) throw std::runtime_error("fail");
                Tracked guard(destroyed);
                try {
                    for (;;) mp::yield();
                } catch (const std::exception&) {
                    caught = true;
                }
                went_on = true;
            },
            2);
        CHECK_FALSE(caught);
        CHECK_FALSE(went_on);
        CHECK(destroyed == 1);
    }

    TEST_CASE("a swallowing catch (...) gets the kill again at its next suspension point")
    {
        int swallowed = 0;
        bool went_on = false;
        int destroyed = 0;
        const std::string message = spawn_failure(
            [&](int rank) {
                if (rank == 1) {
                    mp::yield();
                    throw std::runtime_error("fail");
                }
                Tracked guard(destroyed);
                for (int i = 0; i < 3; ++i) {
                    try {
                        mp::yield();
                        mp::yield();
                    } catch (...) {
                        ++swallowed;
                    }
                }
                int v[1] = {};
                mp::all_reduce(std::span(v));  // a collective is a suspension point too
                went_on = true;
            },
            2);
        CHECK(message == "spawn failed on ranks [1]: rank 1 raised fail");
        CHECK(swallowed == 3);
        CHECK_FALSE(went_on);
        CHECK(destroyed == 1);
    }

    TEST_CASE("a destructor that suspends while its rank is unwound is not thrown into")
    {
        std::vector<int> uncaught_in_destructor;
        bool destructor_finished = false;
        struct Suspends {
            std::vector<int>& uncaught;
            bool& finished;
            ~Suspends()
            {
                uncaught.push_back(std::uncaught_exceptions());
                mp::yield();
                mp::barrier();
                int v[1] = {};
                mp::all_reduce(std::span(v));
                (void)mp::all_gather(1);
                finished = true;
            }
        };
        const std::string message = spawn_failure(
            [&](int rank) {
                if (rank == 1) throw std::runtime_error("fail");
                Suspends s{uncaught_in_destructor, destructor_finished};
                for (;;) mp::yield();
            },
            2);
        CHECK(message == "spawn failed on ranks [1]: rank 1 raised fail");
        CHECK(uncaught_in_destructor == std::vector<int>{1});
        CHECK(destructor_finished);
    }

    TEST_CASE("what escapes a rank while it is unwound is not a root cause")
    {
        try {
            mp::spawn(
                [](int rank) {
                    if (rank == 2) {
                        mp::yield();
                        throw std::runtime_error("root cause");
                    }
                    try {
                        for (;;) mp::yield();
                    } catch (...) {
                        throw std::runtime_error("consequence");
                    }
                },
                3);
            FAIL("spawn did not throw");
        } catch (const mp::SpawnError& e) {
            CHECK(std::string(e.what()) == "spawn failed on ranks [2]: rank 2 raised root cause");
            CHECK(e.errors().size() == 1);
            CHECK(e.errors().count(2) == 1);
        }
    }

    TEST_CASE("a failure while a rank's destructor yields during its own unwinding still ends the spawn")
    {
        // Rank 0's exception is in flight while its destructor yields: rank 1
        // keeps running meanwhile, then rank 0's failure ends the spawn.
        int rank1_turns = 0;
        struct YieldsTwice {
            ~YieldsTwice()
            {
                mp::yield();
                mp::yield();
            }
        };
        const std::string message = spawn_failure(
            [&](int rank) {
                if (rank == 0) {
                    YieldsTwice y;
                    throw std::runtime_error("while unwinding");
                }
                for (;;) {
                    ++rank1_turns;
                    mp::yield();
                }
            },
            2);
        CHECK(message == "spawn failed on ranks [0]: rank 0 raised while unwinding");
        CHECK(rank1_turns == 2);
    }

    TEST_CASE("a later spawn works after a failure, with the collectives reset")
    {
        const auto fails = [](int rank) {
            int v[3] = {rank, rank, rank};
            if (rank <= 1) mp::all_reduce(std::span(v));
            if (rank == 2) mp::send(std::span(v), 0);
            if (rank == 3) throw std::runtime_error("stop");
        };
        CHECK(spawn_failure(fails, 4) == "spawn failed on ranks [3]: rank 3 raised stop");
        std::vector<int> sums(4);
        mp::spawn(
            [&](int rank) {
                mp::barrier();
                int v[1] = {rank};
                mp::all_reduce(std::span(v));
                sums[static_cast<std::size_t>(rank)] = v[0];
                if (rank == 2) mp::send(std::span(v), 0);
                if (rank == 0) mp::recv(std::span(v), 2);
            },
            4);
        CHECK(sums == std::vector<int>(4, 6));
    }

    TEST_CASE("pthread_exit in a rank ends the spawning thread after unwinding every stack")
    {
        ExitingThread seen;
        pthread_t thread{};
        REQUIRE(pthread_create(&thread, nullptr, &spawn_then_exit, &seen) == 0);
        void* result = nullptr;
        REQUIRE(pthread_join(thread, &result) == 0);
        CHECK(reinterpret_cast<std::intptr_t>(result) == 42);
        CHECK(seen.rank_destroyed == 3);
        CHECK(seen.spawner_destroyed == 1);
        CHECK(seen.after_spawn == 0);
        // This thread's spawns are unaffected.
        int runs = 0;
        mp::spawn([&](int) { ++runs; }, 2);
        CHECK(runs == 2);
    }

    TEST_CASE("errors carry the failing rank as error_index, like torch's ProcessRaisedException")
    {
        try {
            mp::spawn(
                [](int rank) {
                    mp::yield();
                    if (rank == 2) throw std::runtime_error("late");
                },
                4);
            FAIL("spawn did not throw");
        } catch (const mp::SpawnError& e) {
            CHECK(e.error_index() == 2);
        }
        try {
            mp::spawn([](int rank) { if (rank == 0) mp::barrier(); }, 2);
            FAIL("spawn did not throw");
        } catch (const mp::DeadlockError& e) {
            CHECK(e.error_index() == -1);
        }
    }

    TEST_CASE("a suspension point in a destructor at normal scope exit returns in a dying spawn")
    {
        // The C++ form of `finally: dist.barrier()`: a throw out of the
        // (noexcept) destructor would end the program.
        struct SyncOnExit {
            bool& killed_inside;
            ~SyncOnExit()
            {
                mp::barrier();
                killed_inside = mp::is_being_killed();
            }
        };
        bool killed_inside = false;
        bool after_scope = false;
        try {
            mp::spawn(
                [&](int rank) {
                    if (rank == 1) {
                        mp::yield();
                        throw std::runtime_error("rank 1 failed");
                    }
                    {
                        const SyncOnExit sync{killed_inside};
                    }
                    after_scope = true;
                    mp::barrier();
                },
                2);
            FAIL("spawn did not throw");
        } catch (const mp::SpawnError& e) {
            CHECK(std::string(e.what()) == "spawn failed on ranks [1]: rank 1 raised rank 1 failed");
            CHECK(e.errors().count(1) == 1);
        }
        CHECK(killed_inside);
        // The next suspension point outside the destructor gets the kill.
        CHECK(after_scope);
    }

    TEST_CASE("is_being_killed is false while a spawn runs, and outside a rank")
    {
        CHECK_FALSE(mp::is_being_killed());
        bool seen = true;
        mp::spawn([&](int) { seen = seen && mp::is_being_killed(); }, 2);
        CHECK_FALSE(seen);
    }

    TEST_CASE("a stack that cannot be mapped is a std::system_error that gives strerror once")
    {
        // Fits a size_t with its guard, but no address space.
        const std::size_t huge = SIZE_MAX - SIZE_MAX / 8;
        try {
            mp::spawn([](int) {}, 1, {.stack_bytes = huge});
            FAIL("spawn did not throw");
        } catch (const std::system_error& e) {
            const std::string message = e.what();
            // ENOMEM from the kernel; valgrind's mmap says EINVAL.
            const std::string reason = std::strerror(e.code().value());
            INFO(message);
            CHECK(e.code().value() != 0);
            const auto first = message.find(reason);
            REQUIRE(first != std::string::npos);
            CHECK(message.find(reason, first + reason.size()) == std::string::npos);
            // The address space ran out, not the mappings.
            CHECK_FALSE(mp_test::contains(message, "vm.max_map_count"));
        }
    }

    TEST_CASE("a stack larger than the kernel will commit does not blame vm.max_map_count")
    {
        if (sizeof(void*) < 8) return;  // no such stack fits a 32-bit address space
        // Twice the memory and swap: more than the kernel's heuristic (and
        // strict) overcommit will grant one mapping, small enough that qemu-user
        // tracks its pages quickly. vm.overcommit_memory=1 grants anything.
        int overcommit = -1;
        std::ifstream("/proc/sys/vm/overcommit_memory") >> overcommit;
        std::ifstream meminfo("/proc/meminfo");
        std::size_t memory_kib = 0;
        for (std::string key; meminfo >> key;) {
            std::size_t kib = 0;
            if ((key == "MemTotal:" || key == "SwapTotal:") && meminfo >> kib) memory_kib += kib;
        }
        if (overcommit == 1 || memory_kib == 0) {
            MESSAGE("memory is overcommitted without limit or unknown here; nothing to check");
            return;
        }
        try {
            mp::spawn([](int) {}, 1, {.stack_bytes = 2 * memory_kib * 1024});
            FAIL("spawn did not throw");
        } catch (const std::system_error& e) {
            const std::string message = e.what();
            INFO(message);
            CHECK_FALSE(mp_test::contains(message, "vm.max_map_count"));
            CHECK(mp_test::contains(message, "more memory than the kernel will commit"));
        }
    }
}
