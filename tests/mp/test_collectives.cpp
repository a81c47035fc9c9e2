#include "support.hpp"

#include <doctest/doctest.h>
#include <pto/mp.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace mp = pto::mp;
using mp_test::spawn_failure;

namespace {

// Its copy throws while `fail_copies` is positive, once per unit.
struct FragileCopy {
    static inline int fail_copies = 0;
    int value = 0;
    explicit FragileCopy(int v) : value(v) {}
    FragileCopy(const FragileCopy& other) : value(other.value)
    {
        if (fail_copies > 0) {
            --fail_copies;
            throw std::runtime_error("copy failed");
        }
    }
    FragileCopy& operator=(const FragileCopy&) = delete;
};

// Each rank gathers its rank; those in `fragile` see their first copy fail,
// catch it and call again. Then a sum over all ranks and a barrier.
std::vector<std::vector<int>> gather_with_retries(int nprocs, std::vector<int> fragile)
{
    std::vector<std::vector<int>> gathered(static_cast<std::size_t>(nprocs));
    std::vector<int> sums(static_cast<std::size_t>(nprocs));
    mp::spawn(
        [&](int rank) {
            const bool is_fragile = std::find(fragile.begin(), fragile.end(), rank) != fragile.end();
            std::vector<FragileCopy> got;
            try {
                if (is_fragile) FragileCopy::fail_copies = 1;
                got = mp::all_gather(FragileCopy(rank * 10));
            } catch (const std::runtime_error&) {
                mp::yield();  // let the others arrive meanwhile
                got = mp::all_gather(FragileCopy(rank * 10));
            }
            for (const auto& g : got) gathered[static_cast<std::size_t>(rank)].push_back(g.value);
            int v[1] = {rank};
            mp::all_reduce(std::span(v));
            sums[static_cast<std::size_t>(rank)] = v[0];
            mp::barrier();
        },
        nprocs);
    CHECK(sums == std::vector<int>(static_cast<std::size_t>(nprocs), nprocs * (nprocs - 1) / 2));
    return gathered;
}

}  // namespace

TEST_SUITE("mp.collectives")
{
    TEST_CASE("barrier releases no rank before all have arrived")
    {
        constexpr int n = 5;
        int arrived = 0;
        std::vector<int> seen;
        mp::spawn(
            [&](int rank) {
                for (int round = 1; round <= 3; ++round) {
                    for (int i = 0; i < rank; ++i) mp::yield();  // arrive in a scrambled order
                    ++arrived;
                    mp::barrier();
                    seen.push_back(arrived);
                    mp::barrier();
                }
            },
            n);
        CHECK(seen == std::vector<int>{5, 5, 5, 5, 5, 10, 10, 10, 10, 10, 15, 15, 15, 15, 15});
    }

    TEST_CASE("all_reduce: sum, product, min and max")
    {
        std::vector<std::array<long, 3>> sum(4), product(4), min(4), max(4);
        std::vector<std::array<double, 2>> dsum(4);
        mp::spawn(
            [&](int rank) {
                const auto r = static_cast<std::size_t>(rank);
                sum[r] = {rank, 10 * rank, 1};
                mp::all_reduce(std::span(sum[r]));
                product[r] = {rank + 1, 2, -1};
                mp::all_reduce(std::span(product[r]), mp::ReduceOp::product);
                min[r] = {rank, 3 - rank, rank == 2 ? -5 : 7};
                mp::all_reduce(std::span(min[r]), mp::ReduceOp::min);
                max[r] = {rank, 3 - rank, rank == 2 ? -5 : 7};
                mp::all_reduce(std::span(max[r]), mp::ReduceOp::max);
                dsum[r] = {0.5 * rank, -1.0};
                mp::all_reduce(std::span(dsum[r]));
            },
            4);
        for (std::size_t r = 0; r < 4; ++r) {
            CHECK(sum[r] == std::array<long, 3>{6, 60, 4});
            CHECK(product[r] == std::array<long, 3>{24, 16, 1});
            CHECK(min[r] == std::array<long, 3>{0, 0, -5});
            CHECK(max[r] == std::array<long, 3>{3, 3, 7});
            CHECK(dsum[r] == std::array<double, 2>{3.0, -4.0});
        }
    }

    TEST_CASE("all_reduce adds in rank order, whatever order the ranks arrive in")
    {
        // 1e16 + 1 rounds back to 1e16: only the rank-order sum gives 0.
        const double values[3] = {1e16, 1.0, -1e16};
        std::vector<double> results(3);
        mp::spawn(
            [&](int rank) {
                for (int i = 0; i < 2 - rank; ++i) mp::yield();  // rank 2 arrives first
                double v[1] = {values[rank]};
                mp::all_reduce(std::span(v));
                results[static_cast<std::size_t>(rank)] = v[0];
            },
            3);
        CHECK(results == std::vector<double>{0.0, 0.0, 0.0});
    }

    TEST_CASE("broadcast copies the source rank's data to every rank")
    {
        std::vector<std::array<int, 3>> data(4);
        mp::spawn(
            [&](int rank) {
                auto& mine = data[static_cast<std::size_t>(rank)];
                mine = {rank, rank * 2, rank * 3};
                mp::broadcast(std::span(mine), 2);
            },
            4);
        for (const auto& d : data) CHECK(d == std::array<int, 3>{2, 4, 6});
    }

    TEST_CASE("all_gather returns every rank's value by rank, also for types that allocate")
    {
        std::vector<std::vector<int>> ints(3);
        std::vector<std::vector<std::string>> names(3);
        mp::spawn(
            [&](int rank) {
                const auto r = static_cast<std::size_t>(rank);
                for (int i = 0; i < rank; ++i) mp::yield();
                ints[r] = mp::all_gather(rank * rank);
                names[r] = mp::all_gather(std::string(20, static_cast<char>('a' + rank)));
            },
            3);
        const std::vector<std::string> expected{std::string(20, 'a'), std::string(20, 'b'), std::string(20, 'c')};
        for (std::size_t r = 0; r < 3; ++r) {
            CHECK(ints[r] == std::vector<int>{0, 1, 4});
            CHECK(names[r] == expected);
        }
    }

    TEST_CASE("a single rank is its own world")
    {
        int v[2] = {3, 4};
        int gathered = 0;
        mp::spawn(
            [&](int) {
                mp::barrier();
                mp::all_reduce(std::span(v), mp::ReduceOp::product);
                mp::broadcast(std::span(v), 0);
                gathered = static_cast<int>(mp::all_gather(v[0]).size());
            },
            1);
        CHECK(v[0] == 3);
        CHECK(v[1] == 4);
        CHECK(gathered == 1);
    }

    TEST_CASE("send and recv pair up and copy the data")
    {
        // A ring: even ranks send first, odd ranks receive first.
        constexpr int n = 4;
        std::vector<std::array<int, 2>> received(n);
        mp::spawn(
            [&](int rank) {
                const std::array<int, 2> mine{rank, rank * 100};
                auto& in = received[static_cast<std::size_t>(rank)];
                const int next = (rank + 1) % n;
                const int previous = (rank + n - 1) % n;
                if (rank % 2 == 0) {
                    mp::send(std::span(mine), next);
                    mp::recv(std::span(in), previous);
                } else {
                    mp::recv(std::span(in), previous);
                    mp::send(std::span(mine), next);
                }
            },
            n);
        CHECK(received == std::vector<std::array<int, 2>>{{3, 300}, {0, 0}, {1, 100}, {2, 200}});
    }

    TEST_CASE("mismatched collectives fail the spawn naming the ranks")
    {
        const auto all_reduce = [](int count, mp::ReduceOp op) {
            std::vector<int> v(static_cast<std::size_t>(count));
            mp::all_reduce(std::span(v), op);
        };
        SUBCASE("different op")
        {
            CHECK(spawn_failure([&](int rank) { all_reduce(4, rank == 2 ? mp::ReduceOp::max : mp::ReduceOp::sum); },
                                4) ==
                  "spawn failed on ranks [2]: rank 2 raised mismatched collectives at step 1: ranks 0-1,3 called "
                  "all_reduce(4 x int, sum), rank 2 called all_reduce(4 x int, max)");
        }
        SUBCASE("different size")
        {
            CHECK(spawn_failure([&](int rank) { all_reduce(rank == 1 ? 8 : 4, mp::ReduceOp::sum); }, 3) ==
                  "spawn failed on ranks [1]: rank 1 raised mismatched collectives at step 1: ranks 0,2 called "
                  "all_reduce(4 x int, sum), rank 1 called all_reduce(8 x int, sum)");
        }
        SUBCASE("different order")
        {
            CHECK(spawn_failure(
                      [&](int rank) {
                          mp::barrier();
                          if (rank == 1) {
                              all_reduce(2, mp::ReduceOp::sum);
                              mp::barrier();
                          } else {
                              mp::barrier();
                              all_reduce(2, mp::ReduceOp::sum);
                          }
                      },
                      2) ==
                  "spawn failed on ranks [1]: rank 1 raised mismatched collectives at step 2: rank 0 called "
                  "barrier, rank 1 called all_reduce(2 x int, sum)");
        }
        SUBCASE("different root")
        {
            CHECK(spawn_failure(
                      [&](int rank) {
                          int v[1] = {rank};
                          mp::broadcast(std::span(v), rank == 3 ? 1 : 0);
                      },
                      4) ==
                  "spawn failed on ranks [3]: rank 3 raised mismatched collectives at step 1: ranks 0-2 called "
                  "broadcast(1 x int, src 0), rank 3 called broadcast(1 x int, src 1)");
        }
        SUBCASE("different element type")
        {
            CHECK(spawn_failure(
                      [&](int rank) {
                          if (rank == 0) {
                              double v[1] = {};
                              mp::all_reduce(std::span(v));
                          } else {
                              (void)mp::all_gather(rank);
                          }
                      },
                      2) ==
                  "spawn failed on ranks [1]: rank 1 raised mismatched collectives at step 1: rank 0 called "
                  "all_reduce(1 x double, sum), rank 1 called all_gather(int)");
        }
    }

    TEST_CASE("a mismatch blames the ranks whose call differs from the most ranks'")
    {
        const auto broadcast_or_all_reduce = [](int rank) {
            int v[1] = {rank};
            if (rank == 0)
                mp::broadcast(std::span(v), 0);
            else
                mp::all_reduce(std::span(v));
        };
        SUBCASE("the first rank is the odd one out")
        {
            CHECK(spawn_failure(broadcast_or_all_reduce, 4) ==
                  "spawn failed on ranks [0]: rank 0 raised mismatched collectives at step 1: ranks 1-3 called "
                  "all_reduce(1 x int, sum), rank 0 called broadcast(1 x int, src 0)");
        }
        SUBCASE("on a tie the first call is taken as meant")
        {
            CHECK(spawn_failure(broadcast_or_all_reduce, 2) ==
                  "spawn failed on ranks [1]: rank 1 raised mismatched collectives at step 1: rank 0 called "
                  "broadcast(1 x int, src 0), rank 1 called all_reduce(1 x int, sum)");
        }
        SUBCASE("three calls: every rank outside the largest group is named")
        {
            CHECK(spawn_failure(
                      [](int rank) {
                          if (rank == 1)
                              mp::barrier();
                          else if (rank == 3)
                              (void)mp::all_gather(rank);
                          else {
                              int v[1] = {rank};
                              mp::all_reduce(std::span(v));
                          }
                      },
                      5) ==
                  "spawn failed on ranks [1, 3]: rank 1 raised mismatched collectives at step 1: ranks 0,2,4 called "
                  "all_reduce(1 x int, sum), rank 1 called barrier, rank 3 called all_gather(int)");
        }
        SUBCASE("a rank that never comes leaves a deadlock naming the call that differs")
        {
            try {
                mp::spawn(
                    [](int rank) {
                        int v[1] = {rank};
                        if (rank == 1) mp::broadcast(std::span(v), 0);
                        if (rank == 0) mp::all_reduce(std::span(v));
                    },
                    3);
                FAIL("spawn did not throw");
            } catch (const mp::DeadlockError& e) {
                CHECK_MESSAGE(std::string(e.what()).find("rank 1: broadcast(1 x int, src 0), unlike the open "
                                                         "all_reduce(1 x int, sum) #1 (2 of 3 arrived)") !=
                                  std::string::npos,
                              e.what());
            }
        }
    }

    TEST_CASE("mismatched send and recv fail the spawn naming both ranks")
    {
        CHECK(spawn_failure(
                  [](int rank) {
                      if (rank == 0) {
                          int v[4] = {};
                          mp::send(std::span(v), 1);
                      } else {
                          mp::yield();
                          int v[8] = {};
                          mp::recv(std::span(v), 0);
                      }
                  },
                  2) == "spawn failed on ranks [1]: rank 1 raised mismatched send/recv: rank 1 receives 8 x int from "
                        "rank 0, which sends 4 x int");
    }

    TEST_CASE("a peer or source that is not a rank is the caller's error")
    {
        CHECK(spawn_failure(
                  [](int) {
                      int v[1] = {};
                      mp::broadcast(std::span(v), 5);
                  },
                  2) == "spawn failed on ranks [0]: rank 0 raised broadcast: src 5 is not a rank of this spawn (2 ranks)");
        CHECK(spawn_failure(
                  [](int rank) {
                      int v[1] = {};
                      if (rank == 1) mp::send(std::span(v), 1);
                  },
                  2) == "spawn failed on ranks [1]: rank 1 raised send: rank 1 names itself");
        CHECK(spawn_failure(
                  [](int) {
                      int v[1] = {};
                      mp::recv(std::span(v), -1);
                  },
                  2) == "spawn failed on ranks [0]: rank 0 raised recv: rank -1 is not a rank of this spawn (2 ranks)");
    }

    TEST_CASE("a collective whose copy throws in a rank that catches it leaves nothing registered")
    {
        const std::vector<std::vector<int>> want(3, std::vector<int>{0, 10, 20});
        SUBCASE("the first rank to arrive fails") { CHECK(gather_with_retries(3, {0}) == want); }
        SUBCASE("a later rank fails") { CHECK(gather_with_retries(3, {1}) == want); }
        SUBCASE("the last rank fails") { CHECK(gather_with_retries(3, {2}) == want); }
        SUBCASE("every rank fails once") { CHECK(gather_with_retries(3, {0, 1, 2}) == want); }
        SUBCASE("a single rank") { CHECK(gather_with_retries(1, {0}) == std::vector<std::vector<int>>{{0}}); }
    }

    TEST_CASE("a suspension point inside all_gather's copy of the value is refused in that rank")
    {
        // The copy runs while the rank's part is registered: were it to
        // suspend, the collective could complete under it.
        struct Yields {
            int value;
            explicit Yields(int v) : value(v) {}
            Yields(const Yields& other) : value(other.value)
            {
                if (mp::get_rank() == 0) mp::yield();
            }
        };
        const std::string refused = "spawn failed on ranks [0]: rank 0 raised pto::mp::yield() called inside "
                                    "all_gather's copy of its value; a rank cannot suspend inside a collective";
        CHECK(spawn_failure(
                  [](int rank) {
                      const auto all = mp::all_gather(Yields(rank + 100));
                      mp::barrier();
                  },
                  2) == refused);
        struct Receives {
            int value;
            explicit Receives(int v) : value(v) {}
            Receives(const Receives& other) : value(other.value)
            {
                if (mp::get_rank() == 0) {
                    int v[1] = {};
                    mp::recv(std::span(v), 1);
                }
            }
        };
        CHECK(spawn_failure(
                  [](int rank) {
                      const auto all = mp::all_gather(Receives(rank));
                      if (rank == 1) {
                          int v[1] = {42};
                          mp::send(std::span(v), 0);
                      }
                  },
                  2) == "spawn failed on ranks [0]: rank 0 raised pto::mp::recv() called inside all_gather's copy "
                        "of its value; a rank cannot suspend inside a collective");
        struct Gathers {
            int value;
            explicit Gathers(int v) : value(v) {}
            Gathers(const Gathers& other) : value(other.value)
            {
                if (mp::get_rank() == 1) (void)mp::all_gather(Gathers(0));
            }
        };
        CHECK(spawn_failure([](int rank) { (void)mp::all_gather(Gathers(rank)); }, 2) ==
              "spawn failed on ranks [1]: rank 1 raised pto::mp::all_gather() called inside all_gather's copy "
              "of its value; a rank cannot suspend inside a collective");
    }

    TEST_CASE("a copy in all_gather that catches the refusal completes the collective")
    {
        struct Tries {
            int value;
            explicit Tries(int v) : value(v) {}
            Tries(const Tries& other) : value(other.value)
            {
                try {
                    mp::barrier();
                } catch (const std::logic_error&) {
                }
            }
        };
        std::vector<int> sums(3);
        mp::spawn(
            [&](int rank) {
                int total = 0;
                for (const Tries& t : mp::all_gather(Tries(rank))) total += t.value;
                sums[static_cast<std::size_t>(rank)] = total;
                mp::barrier();
            },
            3);
        CHECK(sums == std::vector<int>(3, 3));
    }

    TEST_CASE("ranks that pass the same or overlapping buffers fail with a message")
    {
        static std::array<int, 8> shared{};
        CHECK(spawn_failure(
                  [](int) {
                      shared.fill(1);
                      mp::all_reduce(std::span(shared));
                  },
                  3) == "spawn failed on ranks [2]: rank 2 raised all_reduce: ranks 0 and 1 passed the same buffer; "
                        "each rank needs its own, as each process has in torch");
        try {
            mp::spawn(
                [](int rank) {
                    int own[8] = {};
                    mp::all_reduce(rank == 3 ? std::span(own).first(4) : std::span(shared.data() + rank, 4));
                },
                4);
            FAIL("spawn did not throw");
        } catch (const mp::SpawnError& e) {
            CHECK(std::string(e.what()) == "spawn failed on ranks [0, 1, 2]: rank 0 raised all_reduce: ranks 0 and 1 "
                                           "passed overlapping buffers; each rank needs its own, as each process "
                                           "has in torch");
            CHECK(e.errors().size() == 3);
            CHECK(e.error_index() == 0);
        }
        CHECK(spawn_failure(
                  [](int rank) { mp::broadcast(std::span(shared.data() + rank, 4), 0); }, 2) ==
              "spawn failed on ranks [1]: rank 1 raised broadcast: ranks 0 and 1 passed overlapping buffers; "
              "each rank needs its own, as each process has in torch");
        // Adjacent is not overlapping; empty buffers overlap nothing.
        shared.fill(0);
        mp::spawn(
            [](int rank) {
                mp::all_reduce(std::span(shared.data() + 2 * rank, 2));
                mp::all_reduce(std::span(shared.data(), 0));
            },
            4);
        CHECK(shared == std::array<int, 8>{});
    }

    TEST_CASE("a caught overlap error leaves the collective open for a corrected call")
    {
        static std::array<int, 2> shared{};
        std::vector<int> sums(2);
        mp::spawn(
            [&](int rank) {
                if (rank == 0) {
                    shared = {1, 1};
                    mp::all_reduce(std::span(shared));
                    sums[0] = shared[0];
                    return;
                }
                int own[2] = {2, 2};
                try {
                    mp::all_reduce(std::span(shared));
                } catch (const std::invalid_argument&) {
                    mp::all_reduce(std::span(own));
                }
                sums[1] = own[0];
            },
            2);
        CHECK(sums == std::vector<int>{3, 3});
    }

    TEST_CASE("integer reductions wrap on overflow, as torch's do")
    {
        std::vector<int> ints(2);
        std::vector<std::int64_t> longs(2);
        std::vector<std::int16_t> shorts(2);
        std::vector<std::uint8_t> bytes(2);
        mp::spawn(
            [&](int rank) {
                const auto r = static_cast<std::size_t>(rank);
                int i[1] = {rank == 0 ? std::numeric_limits<int>::max() : 1};
                mp::all_reduce(std::span(i));
                ints[r] = i[0];
                std::int64_t l[1] = {rank == 0 ? std::numeric_limits<std::int64_t>::max() : 2};
                mp::all_reduce(std::span(l), mp::ReduceOp::product);
                longs[r] = l[0];
                std::int16_t s[1] = {300};
                mp::all_reduce(std::span(s), mp::ReduceOp::product);
                shorts[r] = s[0];
                std::uint8_t b[1] = {static_cast<std::uint8_t>(rank == 0 ? 200 : 100)};
                mp::all_reduce(std::span(b));
                bytes[r] = b[0];
            },
            2);
        CHECK(ints == std::vector<int>(2, std::numeric_limits<int>::min()));
        CHECK(longs == std::vector<std::int64_t>(2, -2));
        CHECK(shorts == std::vector<std::int16_t>(2, static_cast<std::int16_t>(90000 - 65536)));
        CHECK(bytes == std::vector<std::uint8_t>(2, 44));
    }
}
