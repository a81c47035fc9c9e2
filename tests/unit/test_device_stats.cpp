#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "report/device_stats.hpp"

using pto::Attempt;
using pto::JobResult;
using pto::JobStatus;
using pto::RunSummary;
using pto::report::DeviceStats;
using pto::report::device_stats;

namespace {

// A job that started (pid > 0) on `devices` and ended with `status`.
JobResult ran(JobStatus status, std::vector<int> devices, std::string node = {})
{
    JobResult r;
    r.status = status;
    r.devices = std::move(devices);
    r.node = std::move(node);
    r.pid = 100;
    return r;
}

Attempt tried(JobStatus status, std::vector<int> devices)
{
    Attempt a;
    a.status = status;
    a.devices = std::move(devices);
    return a;
}

// A device's counts as the tries on it ended.
DeviceStats counted(int id, int passed, int failed, int timeout)
{
    DeviceStats d;
    d.id = id;
    d.passed = passed;
    d.failed = failed;
    d.timeout = timeout;
    d.jobs = passed + failed + timeout;
    return d;
}

const DeviceStats* find(const std::vector<DeviceStats>& all, int id, const std::string& node = {})
{
    for (const auto& d : all)
        if (d.id == id && d.node == node)
            return &d;
    return nullptr;
}

}  // namespace

TEST_SUITE("device_stats") {

TEST_CASE("per device: every try is a run, counted by how it ended; devices in id order")
{
    RunSummary s;
    s.results.push_back(ran(JobStatus::passed, {0}));
    s.results.push_back(ran(JobStatus::failed, {1}));
    s.results.push_back(ran(JobStatus::timeout, {1, 2}));
    s.results.push_back(ran(JobStatus::killed, {0}));
    // Failed on 1, timed out on 1, passed on 0: flaky, but device 1 saw both.
    JobResult flaky = ran(JobStatus::flaky, {0});
    flaky.attempts = {tried(JobStatus::failed, {1}), tried(JobStatus::timeout, {1})};
    s.results.push_back(flaky);
    const auto all = device_stats(s);
    REQUIRE(all.size() == 3);
    CHECK(all[0].id == 0);
    CHECK(all[1].id == 1);
    CHECK(all[2].id == 2);
    CHECK(all[0].jobs == 3);
    CHECK(all[0].passed == 2);
    CHECK(all[0].killed == 1);
    CHECK(all[0].failed == 0);
    CHECK_FALSE(all[0].saw_failure());
    CHECK(all[1].jobs == 4);
    CHECK(all[1].passed == 0);
    CHECK(all[1].failed == 2);
    CHECK(all[1].timeout == 2);
    CHECK(all[1].saw_failure());
    CHECK(all[2].jobs == 1);
    CHECK(all[2].timeout == 1);
    for (const auto& d : all) {
        CHECK(d.jobs == d.passed + d.failed + d.timeout + d.killed);
        CHECK_FALSE(d.sick);
        CHECK(d.node.empty());
    }
}

TEST_CASE("jobs that never started, and jobs without devices, count on no device")
{
    RunSummary s;
    s.results.push_back(JobResult{});  // cancelled: no pid, no devices
    JobResult unstartable = ran(JobStatus::failed, {3});
    unstartable.pid = -1;  // its command could not be started: no fault of the device
    s.results.push_back(unstartable);
    s.results.push_back(ran(JobStatus::failed, {}));
    CHECK(device_stats(s).empty());
}

TEST_CASE("a sick device is listed and seen as failing, even when no job ran on it")
{
    RunSummary s;
    s.results.push_back(ran(JobStatus::passed, {0}));
    s.results.push_back(ran(JobStatus::passed, {2}));
    s.sick = {5, 2};
    const auto all = device_stats(s);
    REQUIRE(all.size() == 3);
    CHECK(all[1].id == 2);
    CHECK(all[1].sick);
    CHECK(all[1].jobs == 1);
    CHECK(all[1].saw_failure());
    CHECK(all[2].id == 5);
    CHECK(all[2].sick);
    CHECK(all[2].jobs == 0);
    CHECK_FALSE(all[0].sick);
}

TEST_CASE("a sick GPU of a node is that node's alone, listed though no job ran on it")
{
    RunSummary s;
    JobResult r = ran(JobStatus::passed, {1});
    r.node = "n1";
    s.results.push_back(r);
    s.sick_on_nodes = {{"n2", 1}};
    const auto all = device_stats(s);
    REQUIRE(all.size() == 2);
    CHECK(all[0].name() == "n1:1");
    CHECK_FALSE(all[0].sick);
    CHECK(all[1].name() == "n2:1");
    CHECK(all[1].sick);
    CHECK(all[1].jobs == 0);
    CHECK(device_lines(all) == "[pto-par] device n2:1: 0 jobs, 0 passed, 0 failed, 0 timed out, sick\n");
}

TEST_CASE("under Slurm a device is a GPU of a node: the same index on two nodes is two devices")
{
    RunSummary s;
    s.results.push_back(ran(JobStatus::failed, {0}, "n2"));
    s.results.push_back(ran(JobStatus::passed, {0, 1}, "n1"));
    s.results.push_back(ran(JobStatus::passed, {}, "n1"));  // a step without GPUs
    const auto all = device_stats(s);
    REQUIRE(all.size() == 3);
    CHECK(all[0].name() == "n1:0");
    CHECK(all[1].name() == "n1:1");
    CHECK(all[2].name() == "n2:0");
    CHECK(find(all, 0, "n2")->failed == 1);
    CHECK(find(all, 0, "n1")->passed == 1);
    CHECK(find(all, 0, "n1")->failed == 0);
}

TEST_CASE("the status line: counts, then killed and sick only when there are")
{
    DeviceStats d = counted(1, 3, 2, 1);
    CHECK(format_device_line(d) == "[pto-par] device 1: 6 jobs, 3 passed, 2 failed, 1 timed out\n");
    d.killed = 1;
    d.jobs = 7;
    d.sick = true;
    CHECK(format_device_line(d) == "[pto-par] device 1: 7 jobs, 3 passed, 2 failed, 1 timed out, 1 killed, sick\n");
    DeviceStats one = counted(0, 0, 1, 0);
    one.node = "gpu-7";
    CHECK(format_device_line(one) == "[pto-par] device gpu-7:0: 1 job, 0 passed, 1 failed, 0 timed out\n");
}

TEST_CASE("the lines: only the devices that saw a failure, none when all went well")
{
    RunSummary s;
    s.results.push_back(ran(JobStatus::passed, {0}));
    s.results.push_back(ran(JobStatus::passed, {1}));
    CHECK(device_lines(device_stats(s)).empty());
    s.results.push_back(ran(JobStatus::failed, {1}));
    CHECK(device_lines(device_stats(s)) == "[pto-par] device 1: 2 jobs, 1 passed, 1 failed, 0 timed out\n");
}

TEST_CASE("the --json record and the JUnit properties")
{
    DeviceStats d = counted(1, 1, 1, 1);
    CHECK(device_json(d) == "{\"record\":\"device\",\"device\":1,\"jobs\":3,\"passed\":1,\"failed\":1,"
                            "\"timeout\":1,\"killed\":0,\"sick\":false}");
    d.node = "n\"1";
    d.sick = true;
    CHECK(device_json(d) == "{\"record\":\"device\",\"device\":1,\"node\":\"n\\\"1\",\"jobs\":3,\"passed\":1,"
                            "\"failed\":1,\"timeout\":1,\"killed\":0,\"sick\":true}");
    DeviceStats zero;
    const std::vector<DeviceStats> all{zero, d};
    const auto props = device_properties(all);
    REQUIRE(props.size() == 12);
    CHECK(props[0] == std::pair<std::string, std::string>("device.0.jobs", "0"));
    CHECK(props[5] == std::pair<std::string, std::string>("device.0.sick", "false"));
    CHECK(props[8] == std::pair<std::string, std::string>("device.n\"1:1.failed", "1"));
    CHECK(props[11] == std::pair<std::string, std::string>("device.n\"1:1.sick", "true"));
}

}
