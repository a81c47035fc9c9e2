// The run's edges: other files, other runs, a full disk, few descriptors,
// endless input, pto-par's own death.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>
#include <fstream>

#include "process.hpp"
#include "runner/launcher.hpp"

using namespace pto::test;
using namespace std::chrono_literals;

TEST_SUITE("edges") {

TEST_CASE("a --log-dir file that is the --json report stops the run before anything starts")
{
    TempDir dir;
    const auto marker = dir.file("ran");
    const auto file = dir.write("jobs.cmds", "@0,label=report touch " + marker + "\n");
    std::filesystem::create_directory(dir.file("out"));
    const auto r = run({pto_par(), "-d", "none", "--log-dir", dir.file("out"), "--json", dir.file("out/report.log"),
                        file});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("report.log") != std::string::npos);
    CHECK(r.err.find("--log-dir") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("a --log-dir file that is the commands file stops the run, by inode through another spelling")
{
    TempDir dir;
    const auto marker = dir.file("ran");
    std::filesystem::create_directory(dir.file("suite"));
    const std::string text = "@0,label=smoke touch " + marker + "\n";
    const auto file = dir.write("suite/smoke.log", text);
    std::filesystem::create_directory_symlink(dir.file("suite"), dir.file("alias"));
    const auto r = run({pto_par(), "-d", "none", "--log-dir", dir.file("alias"), file});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("commands file") != std::string::npos);
    CHECK(dir.read("suite/smoke.log") == text);
    CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("a SIGKILLed run leaves the previous --json report whole, even when it was the --history")
{
    TempDir dir;
    const auto json = dir.file("h.json");
    std::string cmds;
    for (int i = 0; i < 20; ++i)
        cmds += "@0,label=j" + std::to_string(i) + " true\n";
    const auto file = dir.write("h.cmds", cmds + "@0,label=slow sleep 30\n");
    REQUIRE(run({pto_par(), "-d", "none", "--json", json, dir.write("q.cmds", cmds)}).exit_code == 0);
    const auto before = dir.read("h.json");
    REQUIRE(lines_with(before, "\"label\"").size() == 20);
    Process p({pto_par(), "-d", "none", "-j", "1", "--history", json, "--json", json, file});
    REQUIRE(p.wait_for_stderr("START slow", 20s));
    p.send(SIGKILL);
    p.wait(10s);
    CHECK(dir.read("h.json") == before);
}

TEST_CASE("a history whose last line was cut off is used, with a notice")
{
    TempDir dir;
    const auto hist = dir.write("cut.json", "{\"label\":\"a\",\"status\":\"passed\",\"duration_s\":2}\n"
                                            "{\"label\":\"b\",\"status\":\"pas");
    const auto r = run({pto_par(), "-d", "none", "--history", hist, dir.write("c.cmds", "@0,label=a true\n")});
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("cut off") != std::string::npos);
    // A broken line in the middle is a record ignored, said with its line.
    const auto mid = dir.write("mid.json", "{\"label\":\"b\",\"status\":\"pas\n{\"label\":\"a\",\"status\":\"passed\"}\n");
    const auto m = run({pto_par(), "-d", "none", "--history", mid, dir.file("c.cmds")});
    CHECK(m.exit_code == 0);
    CHECK(m.err.find("history file '" + mid + "': a record is ignored: " + mid + ":1: not a JSON object") !=
          std::string::npos);
}

TEST_CASE("hostile --history records are ignored with a notice naming file and line; the run goes on")
{
    TempDir dir;
    const auto hist = dir.write("h.json", "{\"label\":\"a\",\"status\":\"passed\",\"duration_s\":1e308}\n"
                                          "{\"label\":\"b\",\"status\":\"passed\",\"duration_s\":-3}\n"
                                          "{\"label\":\"c\",\"status\":\"great\",\"duration_s\":1}\n"
                                          "{\"label\":\"d\",\"status\":\"passed\",\"duration_s\":1e999}\n"
                                          "{\"label\":\"e\",\"status\":\"passed\",\"duration_s\":2}\n");
    const auto cmds = dir.write("c.cmds", "@0,label=a true\n@0,label=e true\n");
    const auto r = run({pto_par(), "-d", "none", "--history", hist, "--dry-run", cmds});
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("history file '" + hist + "': 4 records are ignored; the first: " + hist +
                     ":1: \"duration_s\" is not a duration of 0 to 1e9 seconds") != std::string::npos);
    // a's duration was thrown away, not printed as a 309-digit number.
    CHECK(r.out.find("0000000000") == std::string::npos);
    CHECK(r.err.find("0000000000") == std::string::npos);
}

TEST_CASE("input past the line or byte cap is refused as it is read, nothing run")
{
    // Finite, so that a pto-par without the caps reads it all and starts
    // running it (and fails here) rather than filling the machine's memory.
    const auto r = run({"/bin/sh", "-c", "yes '@0 true' | head -n 1100000 | exec " + pto_par() + " -d none -"}, {},
                       {}, 60s);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("more than 1000000 lines") != std::string::npos);
    const auto bytes = run({"/bin/sh", "-c", "yes \"@0 echo $(head -c 100000 /dev/zero | tr '\\0' x)\" | head -n 1400 | exec " +
                                                 pto_par() + " -d none -"},
                           {}, {}, 60s);
    CHECK(bytes.exit_code == 2);
    CHECK(bytes.err.find("larger than 128 MiB") != std::string::npos);
}

TEST_CASE("a job whose device list cannot fit execve is a static error, not a failed job")
{
    TempDir dir;
    const auto marker = dir.file("ran");
    const auto file = dir.write("big.cmds", "@0 touch " + marker + "\n@30000,label=wide true\n");
    const auto r = run({pto_par(), "-d", "0-65535", file});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("big.cmds:2:1: error: job 'wide'") != std::string::npos);
    CHECK(r.err.find("PTO_PAR_DEVICES") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(marker));
    // Within the limit it runs.
    CHECK(run({pto_par(), "-d", "0-65535", dir.write("ok.cmds", "@10000 true\n")}).exit_code == 0);
}

TEST_CASE("devices under process groups: one notice at start saying why and what it means")
{
    TempDir dir;
    const auto file = dir.write("p.cmds", "@1 true\n@1 true\n");
    const auto r = run({pto_par(), "-d", "0-1", "--contain", "pgroup", file});
    CHECK(r.exit_code == 0);
    const auto said = lines_with(r.err, "setsid");
    REQUIRE(said.size() == 1);
    CHECK(said[0].find("--contain pgroup") != std::string::npos);
    CHECK(said[0].find("next job") != std::string::npos);
    // Nothing to share, nothing to say.
    const auto none = run({pto_par(), "-d", "none", "--contain", "pgroup", dir.write("n.cmds", "@0 true\n")});
    CHECK(lines_with(none.err, "setsid").empty());
}

TEST_CASE("ulimit -n 16 with standard output a pipe: 16 jobs of 1.6 MB all pass byte-exact, or none starts")
{
    TempDir dir;
    std::string file;
    for (char c = 'a'; c < 'a' + 16; ++c)
        file += std::string("@0,label=") + c + " head -c 1600000 /dev/zero | tr '\\0' " + c + "\n";
    const auto cmds = dir.write("n.cmds", file);
    const auto all_pass = [](const Finished& r) {
        CHECK(r.exit_code == 0);
        CHECK(r.err.find("16 passed") != std::string::npos);
        REQUIRE(r.out.size() == 16 * 1600000);
        for (std::size_t at = 0; at < r.out.size(); at += 1600000) {
            const char c = r.out[at];
            CHECK(r.out.find_first_not_of(c, at) >= at + 1600000);
        }
    };
    // Under process groups one job needs 5 descriptors beside pto-par's 10.
    all_pass(run({pto_par(), "-d", "none", "-j", "4", "--contain", "pgroup", cmds}, {}, {}, 120s,
                 Setup::limit(RLIMIT_NOFILE, 16)));
    // Under cgroups (as root here) the run's cgroup directory, the job's and
    // its cgroup.events are 3 more, less the 2 of the pipe for an exec
    // failure where a job is born in its cgroup by clone3, and the run reads
    // its signals from pto-par's own signalfd: 16 is enough then. Without
    // clone3 (qemu-user) a job needs 3 more, too many for one, which is said
    // at start, and 19 is enough.
    const auto r = run({pto_par(), "-d", "none", "-j", "4", cmds}, {}, {}, 120s, Setup::limit(RLIMIT_NOFILE, 16));
    CHECK(r.err.find("FAIL") == std::string::npos);
    if (!cgroups_usable() || pto::runner::can_start_in_cgroup()) {
        all_pass(r);
    } else {
        CHECK(r.exit_code == 2);
        CHECK(r.err.find("the limit is 16") != std::string::npos);
        all_pass(run({pto_par(), "-d", "none", "-j", "4", cmds}, {}, {}, 120s, Setup::limit(RLIMIT_NOFILE, 19)));
    }
}

TEST_CASE("ulimit -u that leaves the jobs too few processes is said at start, with what it leaves")
{
    if (geteuid() != 0) {
        MESSAGE("skipped: running as another user (root does not count against ulimit -u) needs root");
        return;
    }
    TempDir dir;
    chmod(dir.path().c_str(), 0755);
    std::string cmds;
    for (int i = 0; i < 8; ++i)
        cmds += "@0 true | true\n";
    const auto file = dir.write("u.cmds", cmds);
    chmod(file.c_str(), 0644);
    auto as_nobody = Setup::as_user(65534, 65534);
    if (run({pto_par(), "--version"}, {}, {}, 10s, as_nobody).exit_code != 0) {
        const std::string why = "skipped: user nobody cannot run " + pto_par();
        MESSAGE(why);
        return;
    }
    as_nobody.limits = {{RLIMIT_NPROC, 12}};
    const auto r = run({pto_par(), "-d", "none", "-j", "8", file}, {}, {}, 60s, as_nobody);
    CHECK(r.err.find("ulimit -u allows this user 12 processes and ") != std::string::npos);
    CHECK(r.err.find(" for each of -j 8 jobs at once, and a job whose shell cannot fork fails (lower -j, or raise "
                     "ulimit -u)") != std::string::npos);
    // Room for the jobs: nothing said.
    as_nobody.limits = {{RLIMIT_NPROC, 1000}};
    const auto roomy = run({pto_par(), "-d", "none", "-j", "8", file}, {}, {}, 60s, as_nobody);
    CHECK(roomy.exit_code == 0);
    CHECK(roomy.err.find("ulimit -u") == std::string::npos);
}

TEST_CASE("descriptors too few for even one job: exit 2 at start, naming the limit")
{
    TempDir dir;
    const auto marker = dir.file("ran");
    const auto r = run({pto_par(), "-d", "none", dir.write("f.cmds", "@0 touch " + marker + "\n")}, {}, {}, 60s,
                       Setup::limit(RLIMIT_NOFILE, 12));
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("ulimit -n") != std::string::npos);
    CHECK(r.err.find("the limit is 12") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("two runs in different PID namespaces share no cgroup and signal nothing of each other")
{
    if (!cgroups_usable() || geteuid() != 0 || std::system("unshare -p -f --mount-proc true 2>/dev/null") != 0) {
        MESSAGE("skipped: needs root, cgroup v2 and unshare -p");
        return;
    }
    TempDir dir;
    const auto first_file = dir.write("a.cmds", "@0,label=long sleep 4\n");
    const auto second_file = dir.write("b.cmds", "@0,label=short sleep 0.5\n");
    // Both are pid 1 in their namespaces, so both would be "pto-par-1".
    Process first({"/usr/bin/unshare", "-p", "-f", "--mount-proc", pto_par(), "-d", "none", first_file});
    REQUIRE(first.wait_for_stderr("START long", 10s));
    std::this_thread::sleep_for(700ms);
    Process second({"/usr/bin/unshare", "-p", "-f", "--mount-proc", pto_par(), "-d", "none", second_file});
    const auto b = second.wait(30s);
    const auto a = first.wait(30s);
    CHECK(b.exit_code == 0);
    CHECK(a.exit_code == 0);
    CHECK(a.err.find("PASS long") != std::string::npos);
    CHECK(b.err.find("PASS short") != std::string::npos);
    CHECK(a.err.find("stopped") == std::string::npos);
    CHECK(b.err.find("stopped") == std::string::npos);
}

TEST_CASE("a run SIGKILLed mid-run leaves no process of any job 1 s later, in both modes")
{
    std::vector<std::pair<std::string, std::string>> modes{{"pgroup", "sleep 300 &"}};
    if (cgroups_usable())
        modes.push_back({"cgroup", "setsid sleep 300 &"});
    for (const auto& [mode, start] : modes) {
        CAPTURE(mode);
        TempDir dir;
        const auto pidfile = dir.file("pid");
        Process p({pto_par(), "-d", "none", "--contain", mode,
                   dir.write("k.cmds", "@0,label=bg " + start + " echo $! > " + pidfile + "; sleep 300\n")});
        REQUIRE(p.wait_for_stderr("START bg", 10s));
        pid_t pid = 0;
        for (int i = 0; i < 100 && pid == 0; ++i) {
            std::ifstream in(pidfile);
            in >> pid;
            if (pid == 0)
                std::this_thread::sleep_for(50ms);
        }
        REQUIRE(pid > 0);
        p.send(SIGKILL);
        p.wait(10s);
        CHECK(gone_within(pid, 1000ms));
        if (!gone_within(pid, 0ms))
            kill(pid, SIGKILL);
    }
}

TEST_CASE("a run SIGKILLed while -j 1 checks four devices leaves no check behind under process groups")
{
    // Every device is checked at once, whatever -j says: the guardian must
    // know each check's group, not only as many as -j jobs. A check's shell
    // dies with pto-par (PDEATHSIG); its child is the guardian's to stop.
    TempDir dir;
    const auto pids = dir.file("pids");
    Process p({pto_par(), "-j", "1", "-d", "0-3", "--contain", "pgroup", "--device-check",
               "sleep 300 & echo $! >> " + pids + "; wait", dir.write("k.cmds", "@1 true\n")});
    std::vector<pid_t> checks;
    for (int i = 0; i < 200 && checks.size() < 4; ++i) {
        std::this_thread::sleep_for(50ms);
        checks.clear();
        std::ifstream in(pids);
        for (pid_t pid = 0; in >> pid;)
            checks.push_back(pid);
    }
    REQUIRE(checks.size() == 4);
    p.send(SIGKILL);
    p.wait(10s);
    for (pid_t pid : checks) {
        CAPTURE(pid);
        CHECK(gone_within(pid, 1000ms));
        if (!gone_within(pid, 0ms))
            kill(pid, SIGKILL);
    }
}

TEST_CASE("a full $TMPDIR: the output goes on in the next place, not a byte lost")
{
    TempDir dir;
    const auto small = dir.file("small");
    std::filesystem::create_directory(small);
    if (geteuid() != 0 || std::system(("mount -t tmpfs -o size=2m tmpfs " + small + " 2>/dev/null").c_str()) != 0) {
        MESSAGE("skipped: needs root to mount a tmpfs");
        return;
    }
    std::string file;
    for (char c = 'a'; c < 'c'; ++c)
        file += std::string("@0,label=") + c + " head -c 20000000 /dev/zero | tr '\\0' " + c + "\n";
    const auto r = run({pto_par(), "-d", "none", "-j", "2", dir.write("big.cmds", file)}, {}, {"TMPDIR=" + small});
    (void)std::system(("umount " + small).c_str());
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("lost") == std::string::npos);
    CHECK(r.err.find("did not fit in " + small) != std::string::npos);
    REQUIRE(r.out.size() == 2 * 20000000);
    for (std::size_t at = 0; at < r.out.size(); at += 20000000) {
        const char c = r.out[at];
        CHECK(r.out.find_first_not_of(c, at) >= at + 20000000);
    }
}

namespace {

// Root and unshare -m, which run_with_full_places needs; says so when not.
bool full_places_usable()
{
    if (geteuid() == 0 && std::system("unshare -m true 2>/dev/null") == 0)
        return true;
    MESSAGE("skipped: needs root and unshare -m");
    return false;
}

// pto-par with `options` on `cmds` in a mount namespace of its own where
// every place of the spill fallback list is a 4 MiB tmpfs nearly filled;
// once it says that a job's output waits for room, `then` runs (a shell
// script, $run being pto-par's pid). Its standard output goes to
// dir/out, its standard error to dir/err; the files, and pto-par itself
// (a build under /tmp), are opened before the mounts hide them.
Finished run_with_full_places(TempDir& dir, const std::string& cmds, const std::string& options,
                              const std::string& then)
{
    // In the test's directory, which the mounts do not hide from a
    // process already in it: a relative --log-dir or file is there.
    const std::string script =
        "cd \"$(dirname \"$1\")\" && exec 3<\"$1\" 4>\"$2\" 5>\"$3\" 6<\"$0\" || exit 3\n"
        "for d in /tmp /var/tmp /dev/shm; do\n"
        "  mount -t tmpfs -o size=4m tmpfs $d && head -c 3900000 /dev/zero > $d/filler || exit 3\n"
        "done\n"
        "TMPDIR=/tmp /proc/self/fd/6 -d none " + options + " /dev/fd/3 >&4 2>&5 &\n"
        "run=$!\n"
        "for i in $(seq 200); do grep -q 'is not read until there is' /proc/self/fd/5 && break; sleep 0.1; done\n" +
        then + "wait $run\n";
    return run({"/usr/bin/unshare", "-m", "/bin/sh", "-c", script, pto_par(), cmds, dir.file("out"), dir.file("err")},
               {}, {}, 60s);
}

}  // namespace

TEST_CASE("no temporary place with room: the job's output waits, then goes on, not a byte lost")
{
    TempDir dir;
    if (!full_places_usable())
        return;
    // The job beside the live one keeps its 3 MB block in a spill file,
    // which finds no room: pto-par says so and stops reading it. Room is
    // made once it said so; the job goes on.
    const auto cmds = dir.write("full.cmds", "@0,label=first sleep 4\n"
                                             "@0,label=big head -c 3000000 /dev/zero | tr '\\0' b\n");
    const auto r = run_with_full_places(dir, cmds, "-j 2",
                                        "echo waited $i >&5\n"
                                        "sleep 1\n"
                                        "rm /tmp/filler /var/tmp/filler /dev/shm/filler\n");
    const auto err = dir.read("err");
    CAPTURE(err);
    CHECK(r.exit_code == 0);
    CHECK(err.find("job 'big': no room for its output in ") != std::string::npos);
    CHECK(err.find(" (No space left on device) nor in the other temporary places; it is not read until there is") !=
          std::string::npos);
    CHECK(err.find("job 'big': there is room for its output again") != std::string::npos);
    CHECK(err.find("waited 200") == std::string::npos);
    CHECK(err.find("lost") == std::string::npos);
    CHECK(dir.read("out") == std::string(3000000, 'b'));
}

TEST_CASE("no temporary place with room and a stop signal: the run ends at once and says what was lost")
{
    TempDir dir;
    if (!full_places_usable())
        return;
    // As above, but SIGTERM comes while the job waits for room: the run must
    // end, so it does not wait for room any more. (--output failed: a block
    // that is never live, kept whole whatever else runs.)
    const auto cmds = dir.write("full.cmds", "@0,label=big head -c 3000000 /dev/zero | tr '\\0' b\n");
    const auto r = run_with_full_places(dir, cmds, "--output failed", "kill -TERM $run\n");
    const auto err = dir.read("err");
    CAPTURE(err);
    CHECK(r.exit_code == 143);
    CHECK(r.seconds < 10);
    CHECK(err.find("KILLED big signal=SIGTERM") != std::string::npos);
    CHECK(err.find("No space left on device (") != std::string::npos);
    CHECK(err.find("bytes of output lost)") != std::string::npos);
    CHECK(err.find("there is room for its output again") == std::string::npos);
}

namespace {

// A job that writes 64 KiB at a time and records in `count` how many bytes
// it has written, run with `options` where no place has room and stopped
// by SIGTERM while it waits for room: how many bytes it wrote, what a count
// of lost bytes is checked against. Debian's python3, whose path a pyenv
// shim would not find under the mounts, and its program given whole: it
// opens a script by its full path, which the mounts hide.
long long stopped_writer(TempDir& dir, const std::string& options)
{
    dir.write("writer.py", "import os\nn = 0\nwhile n < 6000000:\n    n += os.write(1, b'b' * 65536)\n"
                           "    open('count', 'w').write(str(n))\n");
    const auto cmds = dir.write("full.cmds", "@0,label=big /usr/bin/python3 -c \"$(cat writer.py)\"\n");
    const auto r = run_with_full_places(dir, cmds, options, "kill -TERM $run\n");
    const auto err = dir.read("err");
    CAPTURE(err);
    CHECK(r.exit_code == 143);
    return std::stoll(dir.read("count"));
}

// The number before `what` in `text`; -1 if it is not there.
long long number_before(const std::string& text, const std::string& what)
{
    const auto at = text.find(what);
    if (at == std::string::npos)
        return -1;
    const auto from = text.find_last_not_of("0123456789", at - 1);
    return std::stoll(text.substr(from + 1, at - from - 1));
}

}  // namespace

TEST_CASE("no temporary place with room and a stop signal: the bytes lost are those that reached no one")
{
    TempDir dir;
    if (!full_places_usable())
        return;
    // Never live (--output failed): its block comes from what was kept,
    // and what did not fit anywhere is the count said.
    const long long written = stopped_writer(dir, "--output failed");
    const auto err = dir.read("err");
    CAPTURE(err);
    const long long lost = number_before(err, " bytes of output lost");
    REQUIRE(lost > 0);
    CHECK(static_cast<long long>(dir.read("out").size()) + lost == written);
    CHECK(err.find("shown as they came") == std::string::npos);
}

TEST_CASE("no temporary place with room, a live job and --log-dir: bytes shown as they came are not lost, "
          "only missing from its log")
{
    TempDir dir;
    if (!full_places_usable())
        return;
    const long long written = stopped_writer(dir, "--log-dir logs");
    const auto err = dir.read("err");
    CAPTURE(err);
    // Every byte the job wrote reached standard output.
    CHECK(static_cast<long long>(dir.read("out").size()) == written);
    CHECK(err.find("bytes of output lost") == std::string::npos);
    const long long unkept = number_before(err, " bytes shown as they came but missing from its log and reports");
    REQUIRE(unkept > 0);
    CHECK(static_cast<long long>(dir.read("logs/big.log").size()) + unkept == written);
}

}  // TEST_SUITE
