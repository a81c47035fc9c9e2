// SPEC section 10: the loop never blocks outside poll, nothing is lost.
// Each reader here is real: a pipe kept open and never read, /dev/full, a
// descriptor limit set in the child before pto-par starts.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "process.hpp"

using namespace pto::test;
using namespace std::chrono_literals;

TEST_SUITE("output_path") {

// Prints far more than a pipe holds, then would run for a minute.
const std::string chatty = "@0,label=chatty yes 'a line of job output, long enough to fill pipes quickly' | "
                           "head -c 20000000; sleep 60\n";

TEST_CASE("a reader of standard output that never reads does not hold up --timeout")
{
    TempDir dir;
    Setup setup;
    setup.stdout_stalled = true;
    // 3 s: time enough for the job to fill the pipe on a busy machine.
    const auto r = run({pto_par(), "-d", "none", "--timeout", "3", "--dump-grace", "0.5", "--output", "stream",
                        dir.write("c.cmds", chatty)},
                       {}, {}, 30s, setup);
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code == 124);
    CHECK(r.seconds < 7);
    const auto said = lines_with(r.err, "bytes of job output could not be written: standard output is not being read");
    REQUIRE(said.size() == 1);
    // Every byte the job printed, and its prefixes, less what the pipe took.
    CHECK(std::stoull(said[0].substr(said[0].find(' ') + 1)) > 10000000);
}

TEST_CASE("SIGINT while standard output is stalled stops the run at once")
{
    TempDir dir;
    Setup setup;
    setup.stdout_stalled = true;
    Process p({pto_par(), "-d", "none", "--output", "stream", dir.write("c.cmds", chatty)}, {}, {}, setup);
    REQUIRE(p.wait_for_stderr("START chatty", 10s));
    std::this_thread::sleep_for(500ms);  // the pipe is full by now
    p.send(SIGINT);
    const auto r = p.wait(30s);
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code == 130);
    CHECK(r.seconds < 8);
    CHECK(r.err.find("KILLED chatty") != std::string::npos);
    CHECK(r.err.find("bytes of job output could not be written") != std::string::npos);
}

TEST_CASE("at a normal end pto-par waits for the reader, until a stop signal")
{
    TempDir dir;
    Setup setup;
    setup.stdout_stalled = true;
    Process p({pto_par(), "-d", "none", dir.write("d.cmds", "@0,label=done head -c 1000000 /dev/zero\n")}, {}, {},
              setup);
    REQUIRE(p.wait_for_stderr("1 passed", 10s));
    std::this_thread::sleep_for(500ms);
    CHECK(process_alive(p.pid()));  // as cat would, it waits for its reader
    p.send(SIGTERM);
    const auto r = p.wait(30s);
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code == 143);
    CHECK(r.err.find("bytes of job output could not be written") != std::string::npos);
}

TEST_CASE("a reader of standard error that never reads does not hold up --timeout either")
{
    TempDir dir;
    Setup setup;
    setup.stderr_stalled = true;
    // The TIMEOUT report shows 64 KiB of the job's output on standard
    // error, more than the pipe holds with the lines around it.
    const auto r = run({pto_par(), "-d", "none", "-v", "--timeout", "2", "--dump-grace", "0.5", "--output", "none",
                        dir.write("c.cmds", chatty + "@0,label=second sleep 60\n")},
                       {}, {}, 30s, setup);
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code == 124);
    CHECK(r.seconds < 6);
}

TEST_CASE("standard output on /dev/full: the error is named and the run exits 1")
{
    TempDir dir;
    Setup setup;
    setup.stdout_path = "/dev/full";
    const auto r = run({pto_par(), "-d", "none", dir.write("e.cmds", "@0,label=hello echo hello\n")}, {}, {}, 30s, setup);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("PASS hello") != std::string::npos);
    CHECK(r.err.find("pto-par: error: writing standard output: No space left on device") != std::string::npos);
    CHECK(r.err.find("standard output was closed") == std::string::npos);
}

TEST_CASE("out of file descriptors, jobs wait for each other and no output is lost")
{
    TempDir dir;
    std::string file;
    for (char c = 'a'; c < 'a' + 20; ++c)
        file += std::string("@0,label=") + c + " head -c 2000000 /dev/zero | tr '\\0' " + c + "\n";
    Setup setup;
    setup.limits = {{RLIMIT_NOFILE, 24}};
    const auto r = run({pto_par(), "-d", "none", "-j", "20", dir.write("f.cmds", file)}, {}, {}, 60s, setup);
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("out of file descriptors") != std::string::npos);
    REQUIRE(r.out.size() == 20 * 2000000);
    // Whole blocks, one per job, each all its own letter.
    std::string seen;
    for (std::size_t at = 0; at < r.out.size(); at += 2000000) {
        const char c = r.out[at];
        CHECK(r.out.find_first_not_of(c, at) >= at + 2000000);
        seen += c;
    }
    std::sort(seen.begin(), seen.end());
    CHECK(seen == "abcdefghijklmnopqrst");
}

TEST_CASE("memory stays bounded while a stalled reader leaves hundreds of MB unwritten")
{
    TempDir dir;
    Setup setup;
    setup.stdout_stalled = true;
    const auto r = run({pto_par(), "-d", "none", "--timeout", "6", "--dump-grace", "0", "--output", "stream",
                        dir.write("m.cmds", "@0,label=m yes 'some job output, a line of about a hundred bytes, "
                                            "the kind of line a test log is made of ....' | "
                                            "head -c 200000000; sleep 60\n")},
                       {}, {}, 60s, setup);
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code == 124);
    const auto said = lines_with(r.err, "bytes of job output could not be written");
    REQUIRE(said.size() == 1);
    CHECK(std::stoull(said[0].substr(said[0].find(' ') + 1)) > 200000000);
    // ru_maxrss of pto-par and the job's processes, the largest of them.
    MESSAGE("peak RSS " << r.max_rss_kib << " KiB");
#if !defined(__SANITIZE_ADDRESS__)
    // (ASan keeps freed memory in quarantine, up to 256 MiB: no bound to see.)
    CHECK(r.max_rss_kib < 32 * 1024);
#endif
}

}
