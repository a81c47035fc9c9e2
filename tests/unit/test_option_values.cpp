#include <doctest/doctest.h>

#include "cli/option_values.hpp"

using namespace pto::cli;

TEST_SUITE("option_values") {
TEST_CASE("bytes take K, M or G and stop at 1T")
{
    CHECK(*parse_bytes("4M", "--x") == 4u << 20);
    CHECK(*parse_bytes("0", "--x") == 0u);
    CHECK(!parse_bytes("2048G", "--x"));
    CHECK(!parse_bytes("4MB", "--x"));
    CHECK(!parse_bytes("", "--x"));
}

TEST_CASE("jobs are whole numbers or auto")
{
    CHECK(*parse_jobs("auto") == 0u);
    CHECK(*parse_jobs("3") == 3u);
    CHECK(!parse_jobs("0"));
    CHECK(!parse_jobs("3x"));
}

TEST_CASE("one_of names every word it accepts")
{
    CHECK(*one_of("never", "--color", {"auto", "always", "never"}) == "never");
    const auto bad = one_of("sometimes", "--color", {"auto", "always", "never"});
    REQUIRE(!bad);
    CHECK(bad.error().message == "invalid value 'sometimes' for --color: expected auto, always or never");
}

TEST_CASE("launcher is local or slurm")
{
    CHECK(*parse_launcher("slurm", "--launcher"));
    CHECK(!*parse_launcher("local", "--launcher"));
    CHECK(!parse_launcher("ssh", "--launcher"));
}
}
