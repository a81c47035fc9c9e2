// Retries: a job that fails, then passes, is flaky in every report.
#include <doctest/doctest.h>

#include "process.hpp"

using namespace pto::test;
using namespace std::chrono_literals;

TEST_SUITE("retries") {

TEST_CASE("a job that fails once then passes is FLAKY in status lines, --json and --junit, and the run exits 0")
{
    TempDir dir;
    const auto marker = dir.file("tried");
    const auto json = dir.file("r.json");
    const auto junit = dir.file("r.xml");
    const auto r = run({pto_par(), "-d", "0-1", "--json", json, "--junit", junit,
                        dir.write("f.cmds", "@1,label=flaky,retries=2 if [ -e " + marker + " ]; then echo second; "
                                            "else touch " + marker + "; echo first; exit 1; fi\n"
                                            "@1,label=steady true\n")});
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("RETRY flaky exit=1") != std::string::npos);
    CHECK(r.err.find("(attempt 1 of 3; running it again)") != std::string::npos);
    CHECK(r.err.find("(passed on attempt 2 of 3)") != std::string::npos);
    CHECK(r.err.find("FLAKY flaky exit=0") != std::string::npos);
    CHECK(r.err.find("1 flaky") != std::string::npos);
    const auto report = dir.read("r.json");
    CHECK(report.find("\"label\":\"flaky\"") != std::string::npos);
    CHECK(report.find("\"status\":\"flaky\"") != std::string::npos);
    CHECK(report.find("\"attempts\":[{\"status\":\"failed\",\"exit_code\":1") != std::string::npos);
    CHECK(lines_with(report, "\"attempts\"").size() == 1);
    const auto xml = dir.read("r.xml");
    CHECK(xml.find("<flakyFailure") != std::string::npos);
    CHECK(xml.find("first") != std::string::npos);
}

TEST_CASE("a job that always fails is failed, with every attempt in --json; --retries applies to every line")
{
    TempDir dir;
    const auto json = dir.file("r.json");
    const auto r = run({pto_par(), "-d", "none", "--retries", "2", "--json", json,
                        dir.write("a.cmds", "@0,label=broken echo no; exit 3\n@0,label=once,retries=0 exit 4\n")});
    CHECK(r.exit_code == 1);
    CHECK(lines_with(r.err, "RETRY broken").size() == 2);
    CHECK(r.err.find("FAIL broken exit=3") != std::string::npos);
    CHECK(lines_with(r.err, "RETRY once").empty());
    const auto report = dir.read("r.json");
    const auto broken = lines_with(report, "\"label\":\"broken\"");
    REQUIRE(broken.size() == 1);
    CHECK(broken[0].find("\"status\":\"failed\"") != std::string::npos);
    std::size_t attempts = 0;
    for (std::size_t at = broken[0].find("{\"status\":\"failed\",\"exit_code\":3"); at != std::string::npos;
         at = broken[0].find("{\"status\":\"failed\",\"exit_code\":3", at + 1))
        ++attempts;
    CHECK(attempts == 3);
    CHECK(run({pto_par(), "--retries", "x", dir.file("a.cmds")}).exit_code == 2);
}

TEST_CASE("with -x, a failure that will be retried does not stop the run")
{
    TempDir dir;
    const auto marker = dir.file("tried");
    const auto r = run({pto_par(), "-d", "none", "-x", "-j", "1",
                        dir.write("x.cmds", "@0,label=flaky,retries=1 [ -e " + marker + " ] || { touch " + marker +
                                                "; exit 1; }\n@0,label=after true\n")});
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("PASS after") != std::string::npos);
}

}
