#include <doctest/doctest.h>

#include "cli/process_limit.hpp"

using pto::cli::process_limit_notice;

TEST_SUITE("process_limit") {

TEST_CASE("ulimit -u that leaves a job fewer than a shell and its command is said, with what it leaves")
{
    // 12 allowed, 1 running, the guardian: 10 left for 8 jobs.
    const auto said = process_limit_notice(12, 1, 8);
    REQUIRE(said);
    CHECK(*said == "ulimit -u allows this user 12 processes and 1 run now: that leaves 1 for each of -j 8 jobs at "
                   "once, and a job whose shell cannot fork fails (lower -j, or raise ulimit -u)");
    // Nothing left at all.
    CHECK(process_limit_notice(10, 30, 1)->find("that leaves 0 for each of -j 1 jobs") != std::string::npos);
}

TEST_CASE("a limit with room for two processes a job says nothing")
{
    CHECK_FALSE(process_limit_notice(12, 1, 5));
    CHECK_FALSE(process_limit_notice(1000, 100, 8));
    CHECK_FALSE(process_limit_notice(12, 1, 0));
}

}
