// Before the first job starts and after the last one ends: the command
// line, the commands file as it is read, and the signals of both ends.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "process.hpp"

using namespace pto::test;
using namespace std::chrono_literals;

namespace {

// "Flat" memory: a few MiB of pto-par's own, far from the hundreds of MiB an
// unbounded read would take; ASan's shadow memory alone is some 30 MiB.
#if defined(__SANITIZE_ADDRESS__)
constexpr long flat_rss_kib = 96 * 1024;
#else
constexpr long flat_rss_kib = 32 * 1024;
#endif

}  // namespace

namespace {

// A FIFO opened for reading and writing by the test, so that pto-par's
// open of it does not wait and its reader never sees end of file until the
// test says so.
class Fifo {
public:
    explicit Fifo(const std::string& path) : path_(path)
    {
        REQUIRE(mkfifo(path.c_str(), 0600) == 0);
        fd_ = open(path.c_str(), O_RDWR | O_CLOEXEC);
        REQUIRE(fd_ >= 0);
    }
    ~Fifo() { close_end(); }
    Fifo(const Fifo&) = delete;
    Fifo& operator=(const Fifo&) = delete;
    void write_text(const std::string& text) const
    {
        REQUIRE(::write(fd_, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    }
    // Until the reader has taken all that was written (true).
    bool drained(std::chrono::milliseconds limit) const
    {
        const auto end = std::chrono::steady_clock::now() + limit;
        int pending = 0;
        while (ioctl(fd_, FIONREAD, &pending) == 0 && pending > 0 && std::chrono::steady_clock::now() < end)
            std::this_thread::sleep_for(5ms);
        return pending == 0;
    }
    void close_end()
    {
        if (fd_ >= 0)
            close(fd_);
        fd_ = -1;
    }

private:
    std::string path_;
    int fd_ = -1;
};

struct HeldReport {
    Finished r;
    std::string report;
};

// pto-par with its JUnit report going to a FIFO that is not read until
// `signals` were sent (50 ms apart), so that it is still writing the report,
// after the summary, when they come: the report must be whole all the same.
HeldReport signals_while_reports_are_written(std::initializer_list<int> signals)
{
    TempDir dir;
    const auto xml = dir.file("junit.xml");
    REQUIRE(mkfifo(xml.c_str(), 0600) == 0);
    const int reader = open(xml.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    REQUIRE(reader >= 0);
    Process p({pto_par(), "-d", "none", "--output", "none", "--junit", xml,
               dir.write("big.cmds", "@0,label=big seq 1 100000\n")});
    REQUIRE(p.wait_for_stderr("1 passed, 0 failed", 30s));
    std::this_thread::sleep_for(200ms);
    for (const int sig : signals) {
        p.send(sig);
        std::this_thread::sleep_for(50ms);
    }
    std::this_thread::sleep_for(150ms);
    HeldReport held;
    char buf[65536];
    for (int idle = 0; idle < 500;) {
        const ssize_t n = read(reader, buf, sizeof buf);
        if (n > 0) {
            held.report.append(buf, static_cast<std::size_t>(n));
            idle = 0;
        } else if (n == 0 || errno != EAGAIN) {
            break;
        } else {
            ++idle;
            std::this_thread::sleep_for(10ms);
        }
    }
    close(reader);
    held.r = p.wait(30s);
    return held;
}

}  // namespace

TEST_SUITE("hardening") {

TEST_CASE("SIGUSR1 while the commands file is still being read says how far it got, and the run goes on")
{
    TempDir dir;
    Fifo fifo(dir.file("cmds"));
    Process p({pto_par(), "-d", "none", dir.file("cmds")});
    fifo.write_text("@0 echo one\n@0 echo two\n");
    // Read, so that the report has the two lines to count (a loaded
    // machine, or ASan, can take longer than any fixed wait to get there).
    REQUIRE(p.wait_for_handled(SIGUSR1, 10s));
    REQUIRE(fifo.drained(10s));
    p.send(SIGUSR1);
    CHECK(p.wait_for_stderr("[pto-par] reading the commands file: 2 lines (24 bytes) so far", 10s));
    fifo.write_text("@0 echo three\n");
    fifo.close_end();
    const auto r = p.wait(30s);
    CHECK(r.signal == 0);
    CHECK(r.exit_code == 0);
    CHECK(lines_with(r.err, "] PASS ").size() == 3);
}

TEST_CASE("SIGTERM or SIGHUP while the commands file is being read: exit 128+N at once, nothing started")
{
    for (const int sig : {SIGTERM, SIGHUP, SIGINT}) {
        TempDir dir;
        Fifo fifo(dir.file("cmds"));
        const auto marker = dir.file("ran");
        Process p({pto_par(), "-d", "none", dir.file("cmds")});
        fifo.write_text("@0 touch " + marker + "\n");
        REQUIRE(p.wait_for_handled(sig, 10s));
        REQUIRE(fifo.drained(10s));
        p.send(sig);
        const auto r = p.wait(10s);
        CHECK_MESSAGE(r.signal == 0, sig);
        CHECK_MESSAGE(r.exit_code == 128 + sig, sig);
        CHECK(r.seconds < 5);
        CHECK_FALSE(std::filesystem::exists(marker));
    }
}

TEST_CASE("a stop signal while the reports are written waits for them, then sets the exit status")
{
    const auto [r, report] = signals_while_reports_are_written({SIGINT});
    CHECK(r.signal == 0);
    CHECK(r.exit_code == 130);
    CHECK(r.err.find("stopped by SIGINT after the last job ended") != std::string::npos);
    CHECK(report.find("100000") != std::string::npos);
    CHECK(report.find("</testsuite>") != std::string::npos);
}

TEST_CASE("of two stop signals while the reports are written, the first one sets the exit status")
{
    // SIGINT's lower number is what the kernel hands out first when both
    // are pending.
    const auto [r, report] = signals_while_reports_are_written({SIGTERM, SIGINT});
    CHECK(r.signal == 0);
    CHECK(r.exit_code == 143);
    CHECK(r.err.find("stopped by SIGTERM after the last job ended") != std::string::npos);
    CHECK(report.find("</testsuite>") != std::string::npos);
}

TEST_CASE("SIGINT stops a run started in the background of a script, which ignores it for its children")
{
    TempDir dir;
    const auto r = run({"/bin/sh", "-c",
                        "\"$0\" -d none \"$1\" & run=$!; sleep 0.5; kill -INT $run; wait $run; echo \"exit=$?\"",
                        pto_par(), dir.write("long.cmds", "@0,label=long sleep 30\n")},
                       {}, {}, 30s);
    CHECK(r.out.find("exit=130") != std::string::npos);
    CHECK(r.seconds < 20);
}

TEST_CASE("a closed standard output is refused up front, nothing started; a closed standard error only discards notices")
{
    TempDir dir;
    const auto ran = dir.file("ran");
    const auto cmds = dir.write("x.cmds", "@0 touch " + ran + "\n@0 echo out\n");
    // Closed, descriptor 1 went to the signalfd opened first, and the jobs'
    // output was written into it: "Invalid argument", exit 1.
    const auto no_out = run({"/bin/sh", "-c", "exec \"$0\" -d none \"$1\" >&-", pto_par(), cmds});
    CHECK(no_out.exit_code == 2);
    CHECK(no_out.err.find("pto-par: error: standard output is closed") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(ran));
    const auto no_err = run({"/bin/sh", "-c", "exec \"$0\" -d none \"$1\" 2>&-", pto_par(), cmds});
    CHECK(no_err.exit_code == 0);
    CHECK(no_err.out == "out\n");
    CHECK(no_err.err.empty());
    CHECK(std::filesystem::exists(ran));
    const auto failing = dir.write("f.cmds", "@0 false\n");
    CHECK(run({"/bin/sh", "-c", "exec \"$0\" -d none \"$1\" 2>&-", pto_par(), failing}).exit_code == 1);
    // A closed standard input is an empty one, for pto-par and the jobs.
    const auto no_in = run({"/bin/sh", "-c", "exec \"$0\" -d none \"$1\" <&-", pto_par(),
                            dir.write("cat.cmds", "@0 cat; echo read=$?\n")});
    CHECK(no_in.exit_code == 0);
    CHECK(no_in.out == "read=0\n");
}

TEST_CASE("pto-par /dev/zero is an immediate error with flat memory")
{
    const auto r = run({pto_par(), "-d", "none", "/dev/zero"}, {}, {}, 3s);
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code == 2);
    CHECK(r.seconds < 2);
    CHECK(r.max_rss_kib < flat_rss_kib);
    CHECK(r.err.find("/dev/zero:1:1: error: NUL byte") != std::string::npos);
}

TEST_CASE("an endless line on standard input stops the reading at the line limit; the writer gets SIGPIPE")
{
    const auto r = run({"/bin/sh", "-c",
                        "yes | tr -d '\\n' | \"$0\" -d none; echo \"pto-par=$?\"",
                        pto_par()},
                       {}, {}, 10s);
    CHECK_FALSE(r.timed_out);
    CHECK(r.seconds < 5);
    CHECK(r.out.find("pto-par=2") != std::string::npos);
    CHECK(r.err.find("<stdin>:1:262145: error: line is longer than 262144 bytes") != std::string::npos);
    CHECK(r.max_rss_kib < flat_rss_kib);
}

}

TEST_SUITE("cli") {

TEST_CASE("--json naming the commands file, forgotten name and all, is refused and the file kept")
{
    TempDir dir;
    const std::string cmds = "@0 touch " + dir.file("ran") + "\n";
    const auto file = dir.write("tests.cmds", cmds);
    // `pto-par --json tests.cmds`: the report's name forgotten, the commands
    // file taken for it, the commands expected on standard input.
    const auto forgot = run({pto_par(), "-d", "none", "--json", file});
    CHECK(forgot.exit_code == 2);
    CHECK(forgot.err.find("refusing to overwrite --json '" + file + "'") != std::string::npos);
    CHECK(forgot.err.find("did you forget the report's own name") != std::string::npos);
    const auto junit = run({pto_par(), "-d", "none", "--junit", file, file});
    CHECK(junit.exit_code == 2);
    CHECK(junit.err.find("--junit '" + file + "' is the commands file") != std::string::npos);
    // The commands on standard input, redirected from the same file.
    const auto redirected = run({"/bin/sh", "-c", "exec \"$0\" -d none --json \"$1\" < \"$1\"", pto_par(), file});
    CHECK(redirected.exit_code == 2);
    CHECK(redirected.err.find("is the commands file (read from standard input)") != std::string::npos);
    CHECK(dir.read("tests.cmds") == cmds);
    CHECK_FALSE(std::filesystem::exists(dir.file("ran")));
}

TEST_CASE("two reports naming one file are refused before either is opened")
{
    TempDir dir;
    const auto cmds = dir.write("x.cmds", "@0 true\n");
    const auto r = run({pto_par(), "-d", "none", "--json", dir.file("r"), "--junit", dir.path() + "/./r", cmds});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--json and --junit both name") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir.file("r")));
    const auto logs = run({pto_par(), "-d", "none", "--junit", dir.file("l"), "--log-dir", dir.file("l"), cmds});
    CHECK(logs.exit_code == 2);
    CHECK(logs.err.find("--junit and --log-dir both name") != std::string::npos);
    // An earlier report of the same kind is overwritten as before.
    dir.write("old.json", "{\"label\":\"x\"}\n");
    const auto again = run({pto_par(), "-d", "none", "--json", dir.file("old.json"), cmds});
    CHECK(again.exit_code == 0);
    CHECK(dir.read("old.json").find("\"status\":\"passed\"") != std::string::npos);
}

TEST_CASE("--shell that cannot run anything is a usage error naming it, nothing runs")
{
    TempDir dir;
    const auto marker = dir.file("ran");
    const auto cmds = dir.write("x.cmds", "@0 touch " + marker + "\n");
    const auto not_exec = dir.write("not-exec", "#!/bin/sh\n");
    for (const auto& [shell, why] : std::vector<std::pair<std::string, std::string>>{
             {"/nonexistent/sh", "No such file or directory"},
             {dir.path(), "it is a directory"},
             {not_exec, "it is not executable"},
             {"no-such-shell-pto-par", "not found in $PATH"}}) {
        const auto r = run({pto_par(), "-d", "none", "--shell", shell, cmds});
        CHECK_MESSAGE(r.exit_code == 2, shell);
        CHECK_MESSAGE(r.err.find("--shell '" + shell + "' cannot run the jobs: " + why) != std::string::npos, r.err);
    }
    CHECK_FALSE(std::filesystem::exists(marker));
    CHECK(run({pto_par(), "-d", "none", "--shell", "sh", cmds}).exit_code == 0);
}

TEST_CASE("the commands file takes every time --timeout takes")
{
    TempDir dir;
    const auto r = run({pto_par(), "-d", "none", "--timeout", "1e9",
                        dir.write("t.cmds", "@0,timeout=1e9 echo ok\n@0,timeout=2.5e1 echo ok\n")});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "ok\nok\n");
    const auto bad = run({pto_par(), "-d", "none", dir.write("bad.cmds", "@0,timeout=1e400 true\n")});
    const auto bad_cli = run({pto_par(), "-d", "none", "--timeout", "1e400"}, "@0 true\n");
    CHECK(bad.exit_code == 2);
    CHECK(bad_cli.exit_code == 2);
    const std::string expected = "expected a number of seconds > 0, such as 600, 1.5 or 2e3";
    CHECK(bad.err.find("invalid timeout '1e400': " + expected) != std::string::npos);
    CHECK(bad_cli.err.find("invalid value '1e400' for --timeout: " + expected) != std::string::npos);
}

TEST_CASE("status lines show valid UTF-8 labels as they are, and escape what could fool a terminal")
{
    TempDir dir;
    const auto r = run({pto_par(), "-d", "none",
                        dir.write("u.cmds", "@0,label=t\xC3\xABst-\xE6\xB5\x8B\xE8\xAF\x95 true\n"
                                            "@0,label=a\xE2\x80\xAE" "cba true\n")});
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("PASS t\xC3\xABst-\xE6\xB5\x8B\xE8\xAF\x95 ") != std::string::npos);
    CHECK(r.err.find("PASS a\\xe2\\x80\\xaecba ") != std::string::npos);
    CHECK(r.err.find("\xE2\x80\xAE") == std::string::npos);
}

TEST_CASE("--help gives -d auto's real discovery order")
{
    const auto h = run({pto_par(), "--help"});
    for (const char* source : {"$PTO_PAR_DEVICES", "$ASCEND_RT_VISIBLE_DEVICES", "$CUDA_VISIBLE_DEVICES",
                               "$SLURM_STEP_GPUS", "$SLURM_JOB_GPUS", "/dev/davinciN", "/dev/nvidiaN"})
        CHECK_MESSAGE(h.out.find(source) != std::string::npos, std::string(source));
    CHECK(h.out.find("$PTO_PAR_DEVICES, else no devices") == std::string::npos);
}

}

TEST_SUITE("scheduling") {

TEST_CASE("a nested run finds exactly its job's GPUs, as UUIDs")
{
    TempDir dir;
    const auto inner = dir.write("inner.cmds", "@1 echo inner=$CUDA_VISIBLE_DEVICES devices=$PTO_PAR_DEVICES\n");
    // The first job holds position 0, so the nested run's job gets GPU-bbb;
    // with and without -e in the outer run, the inner run must see GPU-bbb.
    for (const bool outer_e : {true, false}) {
        const std::string e = outer_e ? "-e CUDA_VISIBLE_DEVICES " : "";
        const auto outer = dir.write("outer.cmds", "@1,label=hold sleep 1\n"
                                                   "@1,label=nested \"$PTO_PAR\" -d auto -e CUDA_VISIBLE_DEVICES -v " +
                                                       inner + "\n");
        std::vector<std::string> argv{"/usr/bin/env", "-u", "PTO_PAR_DEVICES", "-u", "ASCEND_RT_VISIBLE_DEVICES",
                                      "-u", "PTO_PAR_DEVICE_NAMES", "CUDA_VISIBLE_DEVICES=GPU-aaa,GPU-bbb,GPU-ccc",
                                      pto_par(), "-d", "auto", "-j", "2"};
        if (outer_e) {
            argv.emplace_back("-e");
            argv.emplace_back("CUDA_VISIBLE_DEVICES");
        }
        argv.push_back(outer);
        const auto r = run(argv, {}, {}, 30s);
        CHECK_MESSAGE(r.exit_code == 0, e << r.err);
        CHECK_MESSAGE(r.out.find("inner=GPU-bbb devices=0\n") != std::string::npos, e << r.out);
        CHECK_MESSAGE(r.out.find("pool 0 from $PTO_PAR_DEVICE_NAMES (GPU UUIDs of the outer run's "
                                 "$CUDA_VISIBLE_DEVICES, as position 0)") != std::string::npos,
                      e << r.out);
    }
}

}
