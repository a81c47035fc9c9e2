#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <random>
#include <thread>

#include "process.hpp"

using namespace pto::test;
using namespace std::chrono_literals;

TEST_SUITE("hardening") {

TEST_CASE("a file of random bytes with NUL bytes is a clear error, nothing runs")
{
    TempDir dir;
    std::mt19937 rng(7);
    std::string junk(4096, '\0');
    for (auto& c : junk)
        c = static_cast<char>(rng());
    junk[100] = '\0';
    const auto r = run({pto_par(), "-d", "none", dir.write("junk.cmds", junk)});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("NUL byte") != std::string::npos);
    CHECK(r.err.find("START") == std::string::npos);
}

TEST_CASE("a 2 MB line is an error at parse time, not a failed job")
{
    TempDir dir;
    const auto file = dir.write("long.cmds", "@0 true\n@0 echo " + std::string(2'000'000, 'x') + "\n");
    const auto r = run({pto_par(), "-d", "none", file});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(file + ":2:") != std::string::npos);
    CHECK(r.err.find("131072") != std::string::npos);
    CHECK(r.err.find("START") == std::string::npos);
}

TEST_CASE("CRLF line endings and a missing final newline are accepted")
{
    TempDir dir;
    const auto r = run({pto_par(), "-d", "none", dir.write("crlf.cmds", "@0 echo one\r\n@0 echo two")});
    CHECK(r.exit_code == 0);
    CHECK((r.out == "one\ntwo\n" || r.out == "two\none\n"));
}

TEST_CASE("every bad time value is a usage error")
{
    for (const auto& [opt, value] : std::vector<std::pair<std::string, std::string>>{
             {"--timeout", "abc"}, {"--timeout", "0"}, {"--job-timeout", "-5"}, {"--dump-grace", "x"},
             {"--kill-grace", "nan"}, {"--timeout", "inf"}, {"--timeout", ""}}) {
        const auto r = run({pto_par(), opt, value, "-d", "none"}, "@0 true\n");
        CHECK_MESSAGE(r.exit_code == 2, opt << " " << value);
        CHECK_MESSAGE(r.err.find("'" + value + "' for " + opt) != std::string::npos, r.err);
    }
}

TEST_CASE("terminal escape sequences never reach a status line")
{
    TempDir dir;
    const auto r = run({pto_par(), "-d", "none", dir.write("esc.cmds", "@0,label=\x1b[31mred echo hi\n")});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find('\x1b') == std::string::npos);
    CHECK(r.err.find("\\x1b") != std::string::npos);
}

TEST_CASE("too few file descriptors for -j 200: jobs wait their turn, none is dropped")
{
    TempDir dir;
    std::string cmds;
    for (int i = 0; i < 40; ++i)
        cmds += "@0 sleep 0.05\n";
    const auto json = dir.file("r.json");
    const auto r = run({pto_par(), "-d", "none", "-j", "200", "--json", json, dir.write("many.cmds", cmds)}, {}, {}, 60s,
                       Setup::limit(RLIMIT_NOFILE, 24));
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("out of file descriptors") != std::string::npos);
    CHECK(lines_with(r.err, "] PASS ").size() == 40);
    CHECK(lines_with(dir.read("r.json"), "\"status\":\"passed\"").size() == 40);
}

TEST_CASE("a job held back by a shortage of descriptors while only device checks run starts when they end")
{
    // Eight checks take most of 32 descriptors (those that could not start
    // make their devices sick, which no job here needs); the jobs' starts
    // then fail for descriptors while only checks run. The checks' ends
    // must lift that, as a job's end does: nothing else ever would.
    TempDir dir;
    const auto r = run({pto_par(), "-d", "0-7", "--device-check", "sleep 0.3",
                        dir.write("few.cmds", "@0,label=one echo one\n@0,label=two echo two\n")},
                       {}, {}, 20s, Setup::limit(RLIMIT_NOFILE, 32));
    INFO(r.err);
    CHECK_FALSE(r.timed_out);
    CHECK(r.err.find("[pto-par] PASS one") != std::string::npos);
    CHECK(r.err.find("[pto-par] PASS two") != std::string::npos);
}

TEST_CASE("standard output closed by its reader: every job still runs and is reported")
{
    TempDir dir;
    const auto json = dir.file("r.json");
    const auto r = run({pto_par(), "-d", "none", "-j", "1", "--json", json,
                        dir.write("out.cmds", "@0 seq 1 100000\n@0 echo two\n@0 echo three\n")},
                       {}, {}, 60s, Setup::closed_stdout());
    CHECK(r.exit_code == 0);
    CHECK(r.signal == 0);
    CHECK(lines_with(dir.read("r.json"), "\"status\":\"passed\"").size() == 3);
    CHECK(r.err.find("standard output was closed") != std::string::npos);
}

TEST_CASE("output that cannot be kept (file size limit) is reported and fails the run")
{
    TempDir dir;
    // Started beside a live job, so that its block is kept until it ends.
    const auto r = run({pto_par(), "-d", "none", "-j", "2",
                        dir.write("big.cmds", "@0,label=first sleep 1\n@0,label=big head -c 3000000 /dev/zero\n")},
                       {}, {"TMPDIR=" + dir.path()}, 60s, Setup::limit(RLIMIT_FSIZE, 1 << 19));
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("PASS big exit=0") != std::string::npos);
    CHECK(r.err.find("File too large") != std::string::npos);
    CHECK(r.err.find("bytes of output lost") != std::string::npos);
}

TEST_CASE("a setsid grandchild holding the pipe neither hangs the job nor outlives it (cgroup) or the run (pgroup)")
{
    for (const std::string contain : {"cgroup", "pgroup"}) {
        CAPTURE(contain);
        if (contain == "cgroup" && !cgroups_usable())
            continue;
        if (contain == "pgroup" && !subreaper_usable()) {
            MESSAGE("skipped for pgroup: no child subreaper here (qemu-user refuses PR_SET_CHILD_SUBREAPER)");
            continue;
        }
        TempDir dir;
        const auto pidfile = dir.file("escaped.pid");
        const auto file = dir.write(
            "esc.cmds", "@0,label=leaky setsid sh -c 'echo $$ > " + pidfile +
                            "; exec sleep 60' & while [ ! -s " + pidfile + " ]; do sleep 0.01; done; echo done\n");
        const auto r = run({pto_par(), "-d", "none", "--contain", contain, "--kill-grace", "1", file}, {}, {}, 20s);
        CHECK(r.exit_code == 0);
        CHECK(r.seconds < 5);
        CHECK(r.out == "done\n");
        if (contain == "cgroup")
            CHECK(r.err.find("PASS leaky exit=0") != std::string::npos);
        if (contain == "cgroup")
            CHECK(r.err.find("(stopped 1 leftover process)") != std::string::npos);
        else
            CHECK(r.err.find("stopping 1 process that left their job's process group") != std::string::npos);
        const pid_t escaped = static_cast<pid_t>(std::stol(dir.read("escaped.pid")));
        bool gone = false;
        for (int i = 0; i < 200 && !(gone = !process_alive(escaped)); ++i)
            std::this_thread::sleep_for(10ms);
        CHECK(gone);
    }
}

}

TEST_SUITE("hardening") {

TEST_CASE("a job starts with SIGPIPE and SIGXFSZ at their defaults, though pto-par ignores them")
{
    TempDir dir;
    const auto r = run({pto_par(), "-d", "none", dir.write("sig.cmds", "@0 grep SigIgn /proc/self/status\n")});
    REQUIRE(r.exit_code == 0);
    const auto at = r.out.find("SigIgn:");
    REQUIRE(at != std::string::npos);
    const unsigned long long ignored = std::stoull(r.out.substr(at + 7), nullptr, 16);
    CHECK((ignored & (1ULL << (SIGPIPE - 1))) == 0);
    CHECK((ignored & (1ULL << (SIGXFSZ - 1))) == 0);
}

}
