#include <doctest/doctest.h>

#include <csignal>
#include <vector>

#include "runner/job_lifecycle.hpp"

using namespace std::chrono_literals;
using pto::runner::Clock;
using pto::runner::JobLifecycle;
using pto::runner::StopStage;
using Due = JobLifecycle::Due;

namespace {

struct FakeJob final : pto::runner::Signallable {
    mutable std::vector<int> sent;
    void signal(int sig) const override { sent.push_back(sig); }
    void kill_all() const override { sent.push_back(SIGKILL); }
};

const pto::runner::StopTimes times{5s, 2s, 1s};

}  // namespace

TEST_SUITE("job_lifecycle") {

TEST_CASE("a stop is TERM and CONT, then KILL after the grace, then quarantine if anything is left")
{
    FakeJob job;
    JobLifecycle life(times);
    const auto t0 = Clock::now();
    life.stop(job, t0, false);
    CHECK(job.sent == std::vector<int>{SIGTERM, SIGCONT});
    CHECK(life.next_deadline(true) == t0 + 5s);
    CHECK(life.advance(job, t0 + 4s, true, false) == Due::nothing);
    CHECK(life.advance(job, t0 + 5s, true, false) == Due::nothing);
    CHECK(job.sent.back() == SIGKILL);
    CHECK(life.stage() == StopStage::killing);
    CHECK(life.advance(job, t0 + 6s, false, true) == Due::nothing);  // gone in time
    CHECK(life.advance(job, t0 + 6s, false, false) == Due::quarantine);
}

TEST_CASE("a second stop only hurries: force kills at once")
{
    FakeJob job;
    JobLifecycle life(times);
    const auto t0 = Clock::now();
    life.stop(job, t0, false);
    life.stop(job, t0, false);
    CHECK(job.sent.size() == 2);
    life.stop(job, t0, true);
    CHECK(job.sent.back() == SIGKILL);
    CHECK(life.stage() == StopStage::killing);
    CHECK(life.next_deadline(true) == t0 + 1s);
}

TEST_CASE("its time limit: USR1, the dump grace, then the dump is due")
{
    FakeJob job;
    JobLifecycle life(times);
    const auto t0 = Clock::now();
    life.set_limit(t0 + 10s);
    CHECK(life.next_deadline(true) == t0 + 10s);
    CHECK_FALSE(life.next_deadline(false));  // its leader ended: no limit to keep
    CHECK(life.advance(job, t0 + 10s, true, false) == Due::nothing);
    CHECK(life.timed_out());
    CHECK(job.sent == std::vector<int>{SIGUSR1});
    CHECK(life.next_deadline(true) == t0 + 12s);
    CHECK(life.advance(job, t0 + 12s, true, false) == Due::dump);
    life.dump_delivered();
    CHECK(life.advance(job, t0 + 12s, true, false) == Due::nothing);
}

}
