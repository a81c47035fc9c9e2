#include <doctest/doctest.h>

#include <signal.h>

#include <filesystem>
#include <thread>

#include "process.hpp"

using namespace pto::test;
using namespace std::chrono_literals;

namespace {

// A job that prints a marker when SIGUSR1 asks for its stacks, as Python's
// faulthandler.register(SIGUSR1) would, and otherwise never ends.
const std::string dumper = "trap 'echo STACK-MARKER' USR1; echo started; while :; do sleep 0.05; done";

}  // namespace

TEST_SUITE("time_limits") {

TEST_CASE("a job past its own limit is named with that limit and the signal that ended it, the same in every report")
{
    TempDir dir;
    // The job's shell dies of the SIGUSR1; the test under it prints its
    // stacks and goes on until the SIGTERM after the dump grace.
    const auto file = dir.write("t.cmds", "@0,label=py,timeout=1 sh -c \"" + dumper + "\"; true\n");
    const auto r = run({pto_par(), "--dump-grace", "0.5", "--json", dir.file("r.json"), "--junit", dir.file("r.xml"),
                        file});
    CHECK(r.exit_code == 1);
    INFO(r.err);
    CHECK(r.err.find("[pto-par] TIMEOUT py pid=") != std::string::npos);
    CHECK(r.err.find(" past its 1.0s limit, ran ") != std::string::npos);
    CHECK(r.err.find("[pto-par] TIMEOUT py signal=SIGTERM ") != std::string::npos);
    CHECK(r.err.find("(past its 1.0s limit)\n") != std::string::npos);
    const auto json = dir.read("r.json");
    CHECK(json.find("\"signal\":\"SIGTERM\"") != std::string::npos);
    CHECK(json.find("\"time_limit_s\":1.000000,\"time_limit\":\"job\"") != std::string::npos);
    CHECK(dir.read("r.xml").find("message=\"timed out: past its 1.0s limit, ended by SIGTERM after ") !=
          std::string::npos);
}

TEST_CASE("--timeout: SIGUSR1, the dump under a TIMEOUT header, then stop; exit 124")
{
    TempDir dir;
    const auto json = dir.file("r.json");
    const auto file = dir.write("t.cmds", "@0,label=stuck " + dumper + "\n@0,label=fine true\n@0,label=queued true\n");
    const auto r = run({pto_par(), "-j", "2", "--timeout", "1", "--dump-grace", "0.5", "--kill-grace", "0.5",
                        "--json", json, file});
    CHECK(r.exit_code == 124);
    // timeout + dump grace + kill grace, with room for a slow machine (or
    // qemu-user, where starting pto-par alone takes most of a second).
    CHECK(r.seconds < 1 + 0.5 + 0.5 + 3);
    CHECK(r.seconds >= 1.5);
    const auto header = r.err.find("[pto-par] TIMEOUT stuck pid=");
    const auto marker = r.err.find("STACK-MARKER");
    const auto end = r.err.find("[pto-par] end of output of stuck");
    REQUIRE(header != std::string::npos);
    CHECK(header < marker);
    CHECK(marker < end);
    CHECK(r.err.find("devices=none past the run's 1.0s limit, ran ") != std::string::npos);
    // It catches the SIGUSR1 and ends of the SIGTERM after the dump grace.
    CHECK(r.err.find("[pto-par] TIMEOUT stuck signal=SIGTERM ") != std::string::npos);
    CHECK(r.err.find("(past the run's 1.0s limit)") != std::string::npos);
    CHECK(r.err.find("PASS fine") != std::string::npos);
    // 'queued' may have started beside 'fine' (-j 2) or not: either way it
    // is accounted for, and 'stuck' is a timeout.
    const auto text = dir.read("r.json");
    CHECK(lines_with(text, "\"label\":").size() == 3);
    CHECK(lines_with(text, "\"status\":\"timeout\"").size() == 1);
    CHECK(lines_with(text, "\"label\":\"stuck\"")[0].find("\"status\":\"timeout\"") != std::string::npos);
}

TEST_CASE("the never-started are cancelled when the run's time runs out")
{
    TempDir dir;
    const auto r = run({pto_par(), "-j", "1", "--timeout", "0.5", "--dump-grace", "0.2", "--kill-grace", "0.2",
                        dir.write("c.cmds", "@0,label=long sleep 30\n@0,label=next true\n")});
    CHECK(r.exit_code == 124);
    CHECK(r.err.find("TIMEOUT long") != std::string::npos);
    CHECK(r.err.find("CANCEL next") != std::string::npos);
    CHECK(r.err.find("0 passed, 0 failed, 1 timed out, 0 killed, 1 cancelled") != std::string::npos);
}

TEST_CASE("a per-job timeout stops that job alone and the run goes on")
{
    TempDir dir;
    const auto file = dir.write("p.cmds",
                                "@0,label=a echo a\n"
                                "@0,label=slow,timeout=0.5 " + dumper + "\n"
                                "@0,label=b echo b\n");
    const auto r = run({pto_par(), "-j", "1", "--dump-grace", "0.3", "--kill-grace", "0.3", file});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("PASS a") != std::string::npos);
    CHECK(r.err.find("TIMEOUT slow") != std::string::npos);
    CHECK(r.err.find("PASS b") != std::string::npos);
    CHECK(r.err.find("STACK-MARKER") != std::string::npos);
    CHECK(r.err.find("2 passed, 0 failed, 1 timed out") != std::string::npos);
    // group mode still shows the timed-out job's output on stdout
    CHECK(r.out.find("started\n") != std::string::npos);
    CHECK(r.out.find("STACK-MARKER\n") != std::string::npos);
}

TEST_CASE("--job-timeout applies to every job; a line's timeout= wins")
{
    TempDir dir;
    const auto file = dir.write("j.cmds", "@0,label=short sleep 30\n@0,label=long,timeout=5 sleep 0.6\n");
    const auto r = run({pto_par(), "-j", "2", "--job-timeout", "0.3", "--dump-grace", "0.1", "--kill-grace", "0.1", file});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("TIMEOUT short") != std::string::npos);
    CHECK(r.err.find("PASS long") != std::string::npos);
}

TEST_CASE("under -x a job timeout stops the run")
{
    TempDir dir;
    const auto file = dir.write("x.cmds", "@0,label=slow,timeout=0.3 sleep 30\n@0,label=other sleep 30\n@0,label=never true\n");
    const auto r = run({pto_par(), "-x", "-j", "2", "--dump-grace", "0.1", "--kill-grace", "0.2", file});
    CHECK(r.exit_code == 1);
    CHECK(r.seconds < 5);
    CHECK(r.err.find("TIMEOUT slow") != std::string::npos);
    CHECK(r.err.find("KILLED other") != std::string::npos);
    CHECK(r.err.find("CANCEL never") != std::string::npos);
}

TEST_CASE("SIGUSR1 to pto-par prints where every running job stands, and the run goes on")
{
    TempDir dir;
    const auto ready = dir.file("ready");
    Process p({pto_par(), "-d", "0-1", "--kill-grace", "0.2",
               dir.write("s.cmds", "@label=talker echo first; echo 'last words'; touch " + ready +
                                       "; sleep 30\n@0,label=waiter sleep 30\n")});
    REQUIRE(p.wait_for_stderr("START waiter", 10s));
    for (int i = 0; i < 500 && !std::filesystem::exists(ready); ++i)
        std::this_thread::sleep_for(10ms);
    std::this_thread::sleep_for(100ms);  // let pto-par read the pipe
    p.send(SIGUSR1);
    REQUIRE(p.wait_for_stderr("waiter pid=", 5s));
    p.send(SIGTERM);
    const auto r = p.wait(20s);
    CHECK(r.exit_code == 143);
    const auto talker = lines_with(r.err, "[pto-par]   talker pid=");
    REQUIRE(talker.size() == 1);
    CHECK(talker[0].find("devices=0 running ") != std::string::npos);
    CHECK(talker[0].find("17 bytes of output, last: last words") != std::string::npos);
    CHECK(r.err.find("2 running, 0 queued, 0 finished") != std::string::npos);
}

}
