#include <doctest/doctest.h>

#include <map>
#include <random>
#include <set>
#include <filesystem>
#include <sstream>
#include <sched.h>

#include "process.hpp"
#include "reports.hpp"

using namespace pto::test;

namespace {

// Replays the status lines: every START takes its devices, every end line
// gives them back. Fails the test if a device is taken twice or more than
// `max_jobs` run at once. Sound because pto-par prints START after taking
// the devices and the end line after giving them back, from one thread.
void check_timeline(const std::string& err, std::size_t max_jobs)
{
    std::map<std::string, std::vector<int>> running;
    std::set<int> held;
    std::istringstream in(err);
    for (std::string line; std::getline(in, line);) {
        std::istringstream words(line);
        std::string tag, word, label;
        words >> tag >> word >> label;
        if (tag != "[pto-par]")
            continue;
        const std::vector<int> devices = status_devices(line);
        if (word == "START") {
            for (int d : devices)
                CHECK_MESSAGE(held.insert(d).second, "device " << d << " taken twice at: " << line);
            running[label] = devices;
            CHECK_MESSAGE(running.size() <= max_jobs, "too many jobs at: " << line);
        } else if (word == "PASS" || word == "FAIL" || word == "KILLED" || word == "TIMEOUT") {
            REQUIRE_MESSAGE(running.count(label) == 1, "end without start: " << line);
            for (int d : running[label])
                held.erase(d);
            running.erase(label);
        }
    }
    CHECK(running.empty());
}

}  // namespace

TEST_SUITE("scheduling") {

TEST_CASE("no device is ever held by two running jobs under a random mixed load")
{
    TempDir dir;
    std::mt19937 rng(20261130);
    std::string cmds;
    // Each job claims its devices with mkdir, which fails if another running
    // job holds the same id, then frees them just before it exits.
    for (int i = 0; i < 60; ++i) {
        const int need = static_cast<int>(rng() % 4);  // 0..3 of 5
        const int ms = static_cast<int>(rng() % 40);
        const bool chatty = rng() % 2 == 0;
        cmds += "@" + std::to_string(need) + " for d in $(echo \"$PTO_PAR_DEVICES\" | tr , ' '); do mkdir " +
                dir.path() + "/dev$d || echo CONFLICT; done; " + (chatty ? "seq 1 200; " : "") + "sleep 0.0" +
                (ms < 10 ? "0" : "") + std::to_string(ms) + "; for d in $(echo \"$PTO_PAR_DEVICES\" | tr , ' '); do rmdir " +
                dir.path() + "/dev$d; done\n";
    }
    const auto file = dir.write("load.cmds", cmds);
    const auto r = run({pto_par(), "-d", "0-2,5,7", "-j", "4", file});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("CONFLICT") == std::string::npos);
    CHECK(lines_with(r.err, "] PASS ").size() == 60);
    check_timeline(r.err, 4);
}

TEST_CASE("FIFO with head-of-line blocking: nothing passes a job that does not fit")
{
    TempDir dir;
    // 'wide' needs both devices, so it waits for 'slow'; 'small' would fit
    // beside 'slow' but must not start before 'wide'.
    const auto file = dir.write("fifo.cmds",
                                "@1,label=slow sleep 0.4\n"
                                "@2,label=wide true\n"
                                "@1,label=small true\n");
    const auto r = run({pto_par(), "-d", "0-1", file});
    CHECK(r.exit_code == 0);
    const auto slow_end = r.err.find("PASS slow");
    const auto wide_start = r.err.find("START wide");
    const auto small_start = r.err.find("START small");
    REQUIRE(slow_end != std::string::npos);
    REQUIRE(wide_start != std::string::npos);
    REQUIRE(small_start != std::string::npos);
    CHECK(slow_end < wide_start);
    CHECK(wide_start < small_start);
}

TEST_CASE("a job that needs no device, slot or port waits only for -j, not behind a head that waits for devices")
{
    TempDir dir;
    // 'wide' waits for 'slow'; 'free' and 'free2' take nothing it waits
    // for, 'small' does; -j 3 leaves room for one of the free ones only.
    const auto file = dir.write("free.cmds",
                                "@1,label=slow sleep 1\n"
                                "@2,label=wide true\n"
                                "@0,label=free sleep 0.5\n"
                                "@1,label=small true\n"
                                "@0,label=free2 true\n");
    const auto r = run({pto_par(), "-d", "0-1", "-j", "2", "--lock-dir", "none", file});
    CHECK(r.exit_code == 0);
    INFO(r.err);
    const auto slow_end = r.err.find("PASS slow");
    const auto free_start = r.err.find("START free ");
    const auto free2_start = r.err.find("START free2");
    const auto wide_start = r.err.find("START wide");
    const auto small_start = r.err.find("START small");
    CHECK(free_start < slow_end);
    // -j 2: free2 waits for a running job to end, then passes the head too.
    CHECK(free2_start > r.err.find("PASS free "));
    CHECK(free2_start < slow_end);
    CHECK(slow_end < wide_start);
    CHECK(wide_start < small_start);
}

TEST_CASE("-j bounds the running jobs even without devices")
{
    TempDir dir;
    std::string cmds;
    for (int i = 0; i < 8; ++i)
        cmds += "@0 sleep 0.05\n";
    const auto r = run({pto_par(), "-d", "none", "-j", "2", dir.write("j.cmds", cmds)});
    CHECK(r.exit_code == 0);
    check_timeline(r.err, 2);
    CHECK(lines_with(r.err, "START").size() == 8);
}

TEST_CASE("allocation takes the lowest run of consecutive ids")
{
    TempDir dir;
    const auto r = run({pto_par(), "-d", "0,2-4", dir.write("a.cmds", "@2 echo \"{devices} {device_list} {ndevices}\"\n")});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "2-3 2,3 2\n");
}

TEST_CASE("the static check refuses a job that can never fit, before anything starts")
{
    TempDir dir;
    const auto marker = dir.file("ran");
    const auto file = dir.write("big.cmds", "touch " + marker + "\n@devices=3,label=huge true\n");
    const auto r = run({pto_par(), "-d", "0-1", file});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(file + ":2:1: error: job 'huge' needs 3 devices but the pool has 2 (0-1)") != std::string::npos);
    CHECK(r.err.find("START") == std::string::npos);
    CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("with no devices found, a device job fails the static check with a hint to pass -d")
{
    TempDir dir;
    const auto r = run({pto_par(), dir.write("one.cmds", "true\n")}, {}, {"PTO_PAR_DEVICES="});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("needs 1 device but the pool has no devices") != std::string::npos);
    CHECK(r.err.find("-d") != std::string::npos);
}

TEST_CASE("a job's leftover processes are gone before the next job gets its device")
{
    TempDir dir;
    const auto pidfile = dir.file("straggler.pid");
    // 'leaver' exits at once but leaves a child that ignores SIGTERM in its
    // process group; 'next' gets the only device and checks that child is dead.
    const auto file = dir.write("s.cmds",
                                "@label=leaver (trap '' TERM; touch " + dir.file("ready") + "; sleep 30) & echo $! > " + pidfile +
                                "; while [ ! -e " + dir.file("ready") + " ]; do sleep 0.01; done\n"
                                "@label=next " + alive_or_gone(pidfile) + "\n");
    const auto r = run({pto_par(), "-d", "0", "--kill-grace", "0.3", file});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "GONE\n");
    CHECK(r.err.find("PASS leaver") != std::string::npos);
    CHECK(r.err.find("leftover process") != std::string::npos);
    CHECK(r.err.find("PASS leaver") < r.err.find("START next"));
}

TEST_CASE("-j auto: one job per device on hardware, bounded by CPUs on a simulator")
{
    TempDir dir;
    std::string cmds;
    for (int i = 0; i < 6; ++i)
        cmds += "sleep 0.1\n";
    const auto file = dir.write("auto.cmds", cmds);
    const auto hw = run({pto_par(), "-v", "-d", "0-5", file});
    CHECK(hw.err.find("-j 6") != std::string::npos);
    const auto sim = run({pto_par(), "-v", "-d", "0-5", "-p", "a2a3sim", file});
    cpu_set_t set;  // this test's CPUs are pto-par's: it inherits the affinity
    CPU_ZERO(&set);
    REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
    const auto ncpu = std::to_string(std::min(6, CPU_COUNT(&set)));
    CHECK(sim.err.find("platform a2a3sim, -j " + ncpu) != std::string::npos);
    const auto env_sim = run({pto_par(), "-v", "-d", "0-5", file}, {}, {"PTO_PLATFORM=xsim"});
    CHECK(env_sim.err.find("platform xsim, -j " + ncpu) != std::string::npos);
}

}
