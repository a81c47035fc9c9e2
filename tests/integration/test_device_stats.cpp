// Which device saw the failures: the per-device lines at the end of a run,
// the --json device records and the JUnit testsuite's properties, from real
// jobs that fail only on one device.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "process.hpp"

using namespace pto::test;

namespace {

// A job that runs long enough for its neighbour to start beside it, so that
// two such jobs take one device each, and fails only on device 1.
const std::string fails_on_1 = "sleep 0.6; [ \"$PTO_PAR_DEVICES\" != 1 ]";
// The same, but hangs on device 1 until its time limit.
const std::string hangs_on_1 = "sleep 0.6; [ \"$PTO_PAR_DEVICES\" != 1 ] || sleep 30";

// The testsuite-level properties of a JUnit report, "name=value" a line, as
// Python's XML parser reads them; empty if the file is not well-formed.
std::string suite_properties(const TempDir& dir, const std::string& report)
{
    const std::string out = dir.file("props.txt");
    const std::string cmd =
        "python3 -c 'import sys, xml.dom.minidom as m\n"
        "s = m.parse(sys.argv[1]).documentElement\n"
        "for p in [c for c in s.childNodes if c.nodeName == \"properties\"]:\n"
        "    for q in p.getElementsByTagName(\"property\"):\n"
        "        print(q.getAttribute(\"name\") + \"=\" + q.getAttribute(\"value\"))\n' '" +
        report + "' > '" + out + "'";
    if (std::system(cmd.c_str()) != 0)
        return {};
    return dir.read("props.txt");
}

}  // namespace

TEST_SUITE("device_stats") {

TEST_CASE("a device that fails and hangs its jobs is named at the end, in --json and in --junit")
{
    TempDir dir;
    const auto json = dir.file("r.json");
    const auto xml = dir.file("r.xml");
    const auto r = run({pto_par(), "-d", "0-1", "-j", "2", "--job-timeout", "2", "--dump-grace", "0.2",
                        "--kill-grace", "0.2", "--json", json, "--junit", xml,
                        dir.write("d.cmds", "@1,label=a " + fails_on_1 + "\n@1,label=b " + fails_on_1 +
                                                "\n@1,label=c " + hangs_on_1 + "\n@1,label=d " + hangs_on_1 +
                                                "\n@2,label=both true\n")});
    CHECK(r.exit_code == 1);
    CHECK(lines_with(r.err, "device 0").empty());
    const auto lines = lines_with(r.err, "[pto-par] device ");
    REQUIRE(lines.size() == 1);
    CHECK(lines[0] == "[pto-par] device 1: 3 jobs, 1 passed, 1 failed, 1 timed out");
    // After every job's line, right before the summary.
    const auto at = r.err.find(lines[0]);
    CHECK(r.err.find("PASS both") < at);
    CHECK(r.err.find(" passed, ", at + lines[0].size()) != std::string::npos);

    const auto report = dir.read("r.json");
    const auto records = lines_with(report, "\"record\":\"device\"");
    REQUIRE(records.size() == 2);
    CHECK(records[0] == "{\"record\":\"device\",\"device\":0,\"jobs\":3,\"passed\":3,\"failed\":0,\"timeout\":0,"
                        "\"killed\":0,\"sick\":false}");
    CHECK(records[1] == "{\"record\":\"device\",\"device\":1,\"jobs\":3,\"passed\":1,\"failed\":1,\"timeout\":1,"
                        "\"killed\":0,\"sick\":false}");
    CHECK(report.find("\"record\"") > report.rfind("\"label\""));  // after the job records

    const auto props = suite_properties(dir, xml);
    CHECK(props.find("device.1.jobs=3\n") != std::string::npos);
    CHECK(props.find("device.1.failed=1\n") != std::string::npos);
    CHECK(props.find("device.1.timeout=1\n") != std::string::npos);
    CHECK(props.find("device.1.sick=false\n") != std::string::npos);
    CHECK(props.find("device.0.passed=3\n") != std::string::npos);

    // The report with its device records is read back as history.
    const auto again = run({pto_par(), "-d", "0-1", "--dry-run", "--history", json, "--rerun-failed", json,
                            dir.file("d.cmds")});
    CHECK(again.exit_code == 0);
    CHECK(again.err == "");
    CHECK(again.out.find("re-running 2 of 5 jobs") != std::string::npos);
}

TEST_CASE("-q keeps the device lines; a try that failed before its job passed elsewhere is counted")
{
    TempDir dir;
    const auto marker = dir.file("tried");
    const auto r = run({pto_par(), "-q", "-d", "0-1", "-j", "2",
                        dir.write("q.cmds", "@1,label=a " + fails_on_1 + "\n@1,label=b " + fails_on_1 +
                                                "\n@1,label=flaky,retries=1 [ -e " + marker + " ] || { touch " +
                                                marker + "; exit 1; }\n")});
    CHECK(r.exit_code == 1);
    const auto lines = lines_with(r.err, "[pto-par] device ");
    REQUIRE_FALSE(lines.empty());
    CHECK(lines_with(r.err, "[pto-par] device 1: ").size() == 1);
    CHECK(lines_with(r.err, "[pto-par] FLAKY flaky").size() == 1);
    // The flaky job's first try failed on some device: it is counted there.
    int failed = 0;
    for (const auto& line : lines)
        failed += line.find(", 1 failed,") != std::string::npos ? 1 : line.find(", 2 failed,") != std::string::npos ? 2 : 0;
    CHECK(failed == 2);
}

TEST_CASE("a run where every job passes prints no device line, and --json still has the device records")
{
    TempDir dir;
    const auto json = dir.file("r.json");
    const auto r = run({pto_par(), "-d", "0-1", "--json", json,
                        dir.write("p.cmds", "@1,label=a true\n@1,label=b true\n@0,label=none true\n")});
    CHECK(r.exit_code == 0);
    CHECK(lines_with(r.err, "[pto-par] device ").empty());
    const auto report = dir.read("r.json");
    CHECK(lines_with(report, "\"label\":").size() == 3);
    std::size_t jobs = 0;
    for (const auto& record : lines_with(report, "\"record\":\"device\"")) {
        CHECK(record.find("\"failed\":0,\"timeout\":0,\"killed\":0,\"sick\":false}") != std::string::npos);
        jobs += record.find("\"jobs\":2,") != std::string::npos ? 2 : record.find("\"jobs\":1,") != std::string::npos ? 1 : 0;
    }
    CHECK(jobs == 2);
}

}
