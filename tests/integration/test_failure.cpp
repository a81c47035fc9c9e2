#include <doctest/doctest.h>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "process.hpp"

using namespace pto::test;
using namespace std::chrono_literals;

namespace {

pid_t read_pid(const TempDir& dir, const std::string& name)
{
    const auto text = dir.read(name);
    return text.empty() ? -1 : static_cast<pid_t>(std::stol(text));
}


bool wait_for_file(const std::string& path, std::chrono::milliseconds limit)
{
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!std::filesystem::exists(path)) {
        if (std::chrono::steady_clock::now() > end)
            return false;
        std::this_thread::sleep_for(10ms);
    }
    return true;
}

}  // namespace

TEST_SUITE("failure") {

TEST_CASE("fail-fast kills a job that ignores SIGTERM and cancels the queue")
{
    TempDir dir;
    const auto ready = dir.file("ready");
    const auto file = dir.write("ff.cmds",
                                "@0,label=stubborn trap '' TERM; touch " + ready + "; sleep 30\n"
                                "@0,label=bad while [ ! -e " + ready + " ]; do sleep 0.01; done; exit 3\n"
                                "@0,label=never true\n");
    const auto json = dir.file("r.json");
    const auto r = run({pto_par(), "-x", "-j", "2", "--kill-grace", "0.3", "--json", json, file});
    CHECK(r.exit_code == 1);
    CHECK(r.seconds < 5);
    CHECK(r.err.find("FAIL bad exit=3") != std::string::npos);
    CHECK(r.err.find("KILLED stubborn signal=SIGKILL") != std::string::npos);
    CHECK(r.err.find("CANCEL never") != std::string::npos);
    CHECK(r.err.find("0 passed, 1 failed, 0 timed out, 1 killed, 1 cancelled") != std::string::npos);
    const auto lines = dir.read("r.json");
    CHECK(lines_with(lines, "\"label\":").size() == 3);
    CHECK(lines.find("\"label\":\"never\",\"seq\":3,\"line\":3,\"command\":\"true\",\"status\":\"cancelled\"") !=
          std::string::npos);
    CHECK(lines.find("\"status\":\"killed\",\"exit_code\":null,\"signal\":\"SIGKILL\"") != std::string::npos);
}

TEST_CASE("without -x the run goes on after a failure")
{
    TempDir dir;
    const auto r = run({pto_par(), "-d", "none", "-j", "1", dir.write("k.cmds", "@0 exit 1\n@0 echo after\n")});
    CHECK(r.exit_code == 1);
    CHECK(r.out == "after\n");
}

TEST_CASE("Ctrl-C stops every job, background children included, and exits 130")
{
    TempDir dir;
    const auto bg = dir.file("bg.pid");
    const auto fg = dir.file("fg.pid");
    const auto file = dir.write("int.cmds",
                                "@0,label=a echo $$ > " + fg + "; sleep 300 & echo $! > " + bg + "; wait\n"
                                "@0,label=b sleep 300\n"
                                "@0,label=c true\n");
    Process p({pto_par(), "-j", "2", "-d", "none", "--kill-grace", "1", file});
    REQUIRE(p.wait_for_stderr("START b", 10s));
    for (int i = 0; i < 200 && read_pid(dir, "bg.pid") <= 0; ++i)
        std::this_thread::sleep_for(10ms);
    const pid_t bg_pid = read_pid(dir, "bg.pid");
    REQUIRE(bg_pid > 0);
    p.send(SIGINT);
    const auto r = p.wait(20s);
    CHECK(r.exit_code == 130);
    CHECK(r.err.find("KILLED a") != std::string::npos);
    CHECK(r.err.find("KILLED b") != std::string::npos);
    CHECK(r.err.find("CANCEL c") != std::string::npos);
    CHECK(r.err.find("(stopped by SIGINT)") != std::string::npos);
    CHECK(gone_within(bg_pid, 2s));
    CHECK(gone_within(read_pid(dir, "fg.pid"), 2s));
}

TEST_CASE("SIGTERM and SIGHUP to pto-par exit 143 and 129")
{
    for (const auto& [sig, code] : {std::pair{SIGTERM, 143}, {SIGHUP, 129}}) {
        TempDir dir;
        Process p({pto_par(), "-d", "none", dir.write("t.cmds", "@0,label=long sleep 300\n")});
        REQUIRE(p.wait_for_stderr("START long", 10s));
        p.send(sig);
        const auto r = p.wait(20s);
        CHECK(r.exit_code == code);
        CHECK(r.err.find("KILLED long signal=SIGTERM") != std::string::npos);
    }
}

TEST_CASE("a second SIGINT skips the kill grace")
{
    TempDir dir;
    const auto ready = dir.file("ready");
    Process p({pto_par(), "-d", "none", "--kill-grace", "60",
               dir.write("s.cmds", "@0,label=deaf trap '' TERM INT; touch " + ready + "; sleep 300\n")});
    REQUIRE(wait_for_file(ready, 10s));
    p.send(SIGINT);
    REQUIRE(p.wait_for_stderr("stopping", 5s));
    p.send(SIGINT);
    const auto r = p.wait(10s);
    CHECK(r.exit_code == 130);
    CHECK(r.seconds < 8);
    CHECK(r.err.find("KILLED deaf signal=SIGKILL") != std::string::npos);
}

TEST_CASE("jobs die with pto-par even when it is SIGKILLed")
{
    TempDir dir;
    const auto pidfile = dir.file("leader.pid");
    Process p({pto_par(), "-d", "none", dir.write("k.cmds", "@0,label=orphan echo $$ > " + pidfile + "; exec sleep 300\n")});
    REQUIRE(p.wait_for_stderr("START orphan", 10s));
    for (int i = 0; i < 200 && read_pid(dir, "leader.pid") <= 0; ++i)
        std::this_thread::sleep_for(10ms);
    const pid_t leader = read_pid(dir, "leader.pid");
    REQUIRE(leader > 0);
    p.send(SIGKILL);
    (void)p.wait(10s);
    CHECK(gone_within(leader, 3s));
}

TEST_CASE("a job killed by a signal it was not sent is a failure naming the signal")
{
    TempDir dir;
    const auto json = dir.file("r.json");
    const auto r = run({pto_par(), "-d", "none", "--json", json, dir.write("segv.cmds", "@0,label=crash kill -SEGV $$\n")});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("FAIL crash signal=SIGSEGV") != std::string::npos);
    CHECK(dir.read("r.json").find("\"status\":\"failed\",\"exit_code\":null,\"signal\":\"SIGSEGV\"") != std::string::npos);
}

TEST_CASE("no file descriptor of pto-par leaks into a job")
{
    TempDir dir;
    std::string cmds;
    // Several jobs at once, so other jobs' pipes exist while each one looks.
    for (int i = 0; i < 4; ++i)
        cmds += "@0 sleep 0.1; ls /proc/$$/fd\n";
    const auto r = run({pto_par(), "-d", "none", "-j", "4", "--json", dir.file("r.json"), dir.write("fd.cmds", cmds)});
    CHECK(r.exit_code == 0);
    CHECK(r.out == std::string("0\n1\n2\n").append("0\n1\n2\n").append("0\n1\n2\n").append("0\n1\n2\n"));
}

}
