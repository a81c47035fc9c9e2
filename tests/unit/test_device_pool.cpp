#include <doctest/doctest.h>

#include <random>

#include "devices/device_pool.hpp"
#include "devices/port_pool.hpp"

using pto::DevicePool;
using V = std::vector<int>;

TEST_SUITE("device_pool") {

TEST_CASE("the lowest run of consecutive free ids wins")
{
    DevicePool pool({0, 2, 3, 4});
    CHECK(pool.acquire(2) == V{2, 3});
    CHECK(pool.free_count() == 2);
}

TEST_CASE("without a long enough run, the lowest free ids")
{
    DevicePool pool({0, 1, 2, 3, 4, 5});
    auto a = pool.acquire(1);  // 0
    auto b = pool.acquire(1);  // 1
    auto c = pool.acquire(1);  // 2
    REQUIRE(b == V{1});
    pool.release(*b);          // free: 1, 3, 4, 5
    CHECK(pool.acquire(3) == V{3, 4, 5});
    pool.release(V{3, 4, 5});
    pool.release(*a);          // free: 0, 1, 3, 4, 5
    CHECK(pool.acquire(4) == V{0, 1, 3, 4});
    CHECK(c == V{2});
}

TEST_CASE("not enough free ids gives nothing and changes nothing")
{
    DevicePool pool({0, 1});
    auto a = pool.acquire(1);
    CHECK_FALSE(pool.acquire(2).has_value());
    CHECK(pool.free_count() == 1);
    CHECK(pool.acquire(1) == V{1});
    CHECK(a == V{0});
}

TEST_CASE("zero devices always fits, even in an empty pool")
{
    DevicePool pool({});
    CHECK(pool.acquire(0) == V{});
    CHECK_FALSE(pool.acquire(1).has_value());
}

TEST_CASE("input order and duplicates do not matter")
{
    DevicePool pool({5, 3, 3, 4});
    CHECK(pool.size() == 3);
    CHECK(pool.acquire(3) == V{3, 4, 5});
}

TEST_CASE("random acquire/release never hands out an id twice")
{
    std::mt19937 rng(12345);
    DevicePool pool({0, 1, 2, 4, 5, 6, 7, 9});
    std::vector<V> held;
    std::vector<int> owner(10, 0);
    for (int step = 0; step < 5000; ++step) {
        if (!held.empty() && rng() % 2 == 0) {
            const auto k = rng() % held.size();
            for (int id : held[k])
                --owner[static_cast<std::size_t>(id)];
            pool.release(held[k]);
            held.erase(held.begin() + static_cast<long>(k));
        } else if (auto got = pool.acquire(rng() % 4)) {
            for (int id : *got)
                CHECK(++owner[static_cast<std::size_t>(id)] == 1);
            held.push_back(*got);
        }
    }
}

TEST_CASE("withheld devices are never handed out again and shrink what a job can get")
{
    DevicePool pool({0, 1, 2, 3});
    auto a = pool.acquire(2);
    REQUIRE(a);
    pool.withhold(*a);
    CHECK(pool.usable() == 2);
    CHECK_FALSE(pool.acquire(3));
    for (int round = 0; round < 3; ++round) {
        auto b = pool.acquire(2);
        REQUIRE(b);
        CHECK(*b == std::vector<int>{2, 3});
        pool.release(*b);
    }
    CHECK(pool.free_count() == 2);
}

TEST_CASE("ports: the lowest run of consecutive ports no job holds and the machine has free")
{
    pto::PortPool ports(100, 109);
    CHECK(ports.size() == 10);
    const auto all_free = [](int) { return true; };
    auto a = ports.acquire(4, all_free);
    REQUIRE(a);
    CHECK(*a == V{100, 101, 102, 103});
    // 105 is taken by something else on the machine: the next run starts after it.
    auto b = ports.acquire(3, [](int p) { return p != 105; });
    REQUIRE(b);
    CHECK(*b == V{106, 107, 108});
    CHECK_FALSE(ports.acquire(3, all_free));  // free: 104, 105 and 109
    CHECK(ports.acquire(0, all_free) == V{});
    ports.release(*a);
    auto c = ports.acquire(5, all_free);
    REQUIRE(c);
    CHECK(*c == V{100, 101, 102, 103, 104});
    ports.withhold(*b);
    CHECK(ports.usable() == 7);
}

}
