#include <doctest/doctest.h>

#include "placement/local_devices.hpp"
#include "queue/backfill.hpp"

using namespace std::chrono_literals;
using pto::placement::LocalDevices;
using pto::placement::Placement;
using pto::queue::Clock;
using pto::queue::Ledger;

TEST_SUITE("backfill") {

TEST_CASE("the shadow time is when enough running jobs will have ended")
{
    Placement p(std::make_unique<LocalDevices>(std::vector<int>{0, 1, 2, 3}), 1, 0);
    auto a = p.acquire({2, 0});
    auto b = p.acquire({1, 0});
    REQUIRE((a && b));
    const auto t0 = Clock::now();
    // One free: the head needs 4, so both must end; b's end comes first.
    auto shadow = pto::queue::shadow_time({4, 0}, {{t0 + 5s, &*a}, {t0 + 2s, &*b}}, p);
    REQUIRE(shadow);
    CHECK(*shadow == t0 + 5s);
    shadow = pto::queue::shadow_time({2, 0}, {{t0 + 5s, &*a}, {t0 + 2s, &*b}}, p);
    CHECK(shadow == t0 + 2s);
    CHECK_FALSE(pto::queue::shadow_time({5, 0}, {{t0 + 5s, &*a}, {t0 + 2s, &*b}}, p));
}

TEST_CASE("a job that overran and held the head past its shadow is named with the delay")
{
    Ledger l;
    const auto t0 = Clock::now();
    l.went_ahead(3, 0, t0 + 1s, t0 + 2s);
    l.ended(3, t0 + 4s);
    const auto delays = l.head_started(0, t0 + 4s);
    REQUIRE(delays.size() == 1);
    CHECK(delays[0].job == 3);
    CHECK(delays[0].by == 2s);
    CHECK(l.head_started(0, t0 + 5s).empty());  // said once
}

TEST_CASE("a job that kept to its history is never named")
{
    Ledger l;
    const auto t0 = Clock::now();
    l.went_ahead(3, 0, t0 + 1s, t0 + 2s);
    l.ended(3, t0 + 900ms);
    CHECK(l.head_started(0, t0 + 3s).empty());
}

TEST_CASE("a job that ran past its history but ended before the head could start delayed nothing")
{
    Ledger l;
    const auto t0 = Clock::now();
    l.went_ahead(3, 0, t0 + 500ms, t0 + 2s);
    l.ended(3, t0 + 520ms);
    // The head starts late for another reason (the job it waited for ran long).
    CHECK(l.head_started(0, t0 + 2100ms).empty());
}

TEST_CASE("the delay counts only while the job that went ahead still ran")
{
    Ledger l;
    const auto t0 = Clock::now();
    l.went_ahead(3, 0, t0 + 1s, t0 + 2s);
    l.ended(3, t0 + 3s);
    const auto delays = l.head_started(0, t0 + 5s);
    REQUIRE(delays.size() == 1);
    CHECK(delays[0].by == 1s);
}

}
