#include "support.hpp"

#include <doctest/doctest.h>
#include <pto/mp.hpp>

#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace mp = pto::mp;

namespace {

long max_map_count()
{
    long limit = 0;
    std::ifstream("/proc/sys/vm/max_map_count") >> limit;
    return limit;
}

// What spawn says when it refuses `ranks` ranks for their stacks' mappings;
// not one of them may have run.
std::string refusal(int ranks)
{
    int runs = 0;
    std::string message;
    try {
        mp::spawn([&](int) { ++runs; }, ranks, {.stack_bytes = 16 * 1024});
        FAIL("spawn did not throw");
    } catch (const std::runtime_error& e) {
        message = e.what();
    }
    CHECK(runs == 0);
    return message;
}

}  // namespace

TEST_SUITE("mp.scale")
{
    TEST_CASE("10,000 ranks pass 10 barriers")
    {
        constexpr int n = 10'000;
        constexpr int barriers = 10;
        std::vector<int> arrivals(barriers, 0);
        int wrong = 0;
        int done = 0;
        mp::spawn(
            [&](int) {
                for (std::size_t b = 0; b < barriers; ++b) {
                    ++arrivals[b];
                    mp::barrier();
                    if (arrivals[b] != n) ++wrong;
                }
                ++done;
            },
            n, {.stack_bytes = 32 * 1024});
        CHECK(wrong == 0);
        CHECK(done == n);
        CHECK(arrivals == std::vector<int>(barriers, n));
    }

    TEST_CASE("more ranks than vm.max_map_count allows fail before anything runs")
    {
        const long limit = max_map_count();
        if (limit <= 0) {
            MESSAGE("vm.max_map_count is unreadable here; nothing to check");
            return;
        }
        const int too_many = static_cast<int>(limit / 2 + 1);
        const std::string message = refusal(too_many);
        CHECK(mp_test::contains(message, "cannot spawn " + std::to_string(too_many) + " ranks"));
        CHECK(mp_test::contains(message, "vm.max_map_count is " + std::to_string(limit)));
    }

    TEST_CASE("a spawn no vm.max_map_count can hold does not suggest one past INT_MAX")
    {
        if (max_map_count() <= 0) {
            MESSAGE("vm.max_map_count is unreadable here; nothing to check");
            return;
        }
        const std::string message = refusal(std::numeric_limits<int>::max());
        CHECK(mp_test::contains(message, "cannot spawn 2147483647 ranks"));
        CHECK_FALSE(mp_test::contains(message, "sysctl"));
        CHECK(mp_test::contains(message, "more than vm.max_map_count can be (2147483647)"));
    }
}
