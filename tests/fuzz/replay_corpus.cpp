// Runs every file of the fuzz corpora through the fuzzers' checks: inputs
// that once crashed stay regression tests in every build, fuzzer or not.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fuzz_checks.hpp"

namespace {

std::size_t replay(const char* corpus, void (*check)(std::string_view))
{
    const char* root = std::getenv("PTO_PAR_FUZZ_CORPUS");
    REQUIRE_MESSAGE(root != nullptr, "PTO_PAR_FUZZ_CORPUS is not set: run with meson test");
    std::size_t n = 0;
    for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(root) / corpus)) {
        std::ifstream in(entry.path(), std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        check(ss.str());
        ++n;
    }
    return n;
}

}  // namespace

TEST_CASE("the device-range corpus passes the fuzzer's checks")
{
    CHECK(replay("device_range", pto::fuzz::check_device_range) > 0);
}

TEST_CASE("the commands-file corpus passes the fuzzer's checks")
{
    CHECK(replay("commands_file", pto::fuzz::check_commands_file) > 0);
}

TEST_CASE("the step-stream corpus passes the fuzzer's checks")
{
    CHECK(replay("step_stream", pto::fuzz::check_step_stream) > 0);
}
