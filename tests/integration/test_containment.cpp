// A device is never handed on while anything of its last job may still run;
// jobs never hang without a word; one verdict per line.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <sstream>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "process.hpp"

using namespace pto::test;
using namespace std::chrono_literals;

namespace {

pid_t wait_for_pid(const TempDir& dir, const std::string& name, std::chrono::milliseconds limit)
{
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
        const auto text = dir.read(name);
        if (!text.empty())
            return static_cast<pid_t>(std::stol(text));
        std::this_thread::sleep_for(10ms);
    }
    return -1;
}


}  // namespace

TEST_SUITE("containment") {

TEST_CASE("cgroup: a setsid leftover is stopped before its device is handed on")
{
    if (!cgroups_usable())
        return;
    TempDir dir;
    const auto pidfile = dir.file("left.pid");
    const auto r = run({pto_par(), "-d", "0", "--contain", "cgroup", "--kill-grace", "1",
                        dir.write("left.cmds", "@1,label=a setsid sleep 30 & echo $! > " + pidfile +
                                                   "\n@1,label=b " + alive_or_gone(pidfile, "SHARED", "clean") + "\n")},
                       {}, {}, 30s);
    CHECK(r.exit_code == 0);
    CHECK(r.out == "clean\n");
    CHECK(r.err.find("PASS a exit=0") != std::string::npos);
    CHECK(r.err.find("(stopped 1 leftover process)") != std::string::npos);
}

TEST_CASE("cgroup: an ended job's empty cgroup serves the next job; one whose leftovers were killed does not")
{
    if (!cgroups_usable())
        return;
    TempDir dir;
    // Each job prints the cgroup it runs in. One at a time: a and b end
    // cleanly; c leaves a process that ignores SIGTERM and must be killed.
    const std::string where = "cat /proc/self/cgroup";
    const auto r = run({pto_par(), "-d", "none", "-j", "1", "--contain", "cgroup", "--kill-grace", "0.2",
                        dir.write("r.cmds", "@0,label=a " + where + "\n@0,label=b " + where + "\n@0,label=c " + where +
                                                "; (trap '' TERM; touch " + dir.file("ready") + "; sleep 30) & while [ ! -e " +
                                                dir.file("ready") + " ]; do sleep 0.01; done\n@0,label=d " + where + "\n")},
                       {}, {}, 30s);
    CHECK(r.exit_code == 0);
    const auto lines = lines_with(r.out, "pto-par-");
    REQUIRE(lines.size() == 4);
    CHECK(lines[0] == lines[1]);  // recycled
    CHECK(lines[1] == lines[2]);
    CHECK(lines[3] != lines[2]);  // c's was killed: d gets a new one
    CHECK(r.err.find("PASS d exit=0") != std::string::npos);
}

// pto-par's live child in a session of its own: its guardian.
pid_t session_leader_child_now(pid_t parent)
{
    std::ifstream children("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) + "/children");
    pid_t child = 0;
    while (children >> child) {
        std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
        std::string line;
        std::getline(stat, line);
        // pid (comm) state ppid pgrp session: after the last ')'.
        std::istringstream rest(line.substr(line.rfind(')') + 2));
        char state = 0;
        pid_t ppid = 0, pgrp = 0, session = 0;
        rest >> state >> ppid >> pgrp >> session;
        if (session == child && state != 'Z')  // not one that died, unreaped yet
            return child;
    }
    return 0;
}

// The same, given a while: the guardian calls setsid() once it runs, which
// on a loaded machine can be after pto-par has started its jobs.
pid_t session_leader_child(pid_t parent)
{
    const auto end = std::chrono::steady_clock::now() + 10s;
    pid_t child = 0;
    while ((child = session_leader_child_now(parent)) == 0 && std::chrono::steady_clock::now() < end)
        std::this_thread::sleep_for(20ms);
    return child;
}

TEST_CASE("cgroup: what a SIGKILLed run and its guardian left in its cgroups is stopped by the next run")
{
    if (!cgroups_usable())
        return;
    TempDir dir;
    // Out of sight of other tests' runs, which would stop the leftover too.
    TestCgroup cg;
    Setup in_cgroup;
    in_cgroup.cgroup = cg.path();
    const auto pidfile = dir.file("orphan.pid");
    pid_t orphan = -1;
    {
        Process p({pto_par(), "-d", "none", "--contain", "cgroup",
                   dir.write("k.cmds", "@0,label=orphan sleep 300 & echo $! > " + pidfile + "; wait\n")},
                  {}, {}, in_cgroup);
        orphan = wait_for_pid(dir, "orphan.pid", 10s);
        REQUIRE(orphan > 0);
        // Its guardian would stop the leftover: this is the case where
        // both were killed (the OOM killer, a kill of everything). Stopped
        // first, pto-par cannot start another guardian in between.
        const pid_t guardian = session_leader_child(p.pid());
        REQUIRE(guardian > 0);
        p.send(SIGSTOP);
        kill(guardian, SIGKILL);
        p.send(SIGKILL);
        (void)p.wait(10s);
    }
    // Its shell died with pto-par; the sleep under it did not.
    std::this_thread::sleep_for(200ms);
    REQUIRE(process_alive(orphan));
    const auto r =
        run({pto_par(), "-d", "none", "--contain", "cgroup", dir.write("n.cmds", "@0 true\n")}, {}, {}, 30s, in_cgroup);
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("stopped 1 processes left in its cgroups by an earlier pto-par run that was killed") !=
          std::string::npos);
    CHECK(gone_within(orphan, 3s));
    if (process_alive(orphan))
        kill(orphan, SIGKILL);
}

TEST_CASE("the guardian has a name of its own: the newest process named pto-par is the run, which -v and SIGUSR1 name")
{
    TempDir dir;
    Process p({pto_par(), "-v", "-d", "none", dir.write("n.cmds", "@0,label=long sleep 300\n")});
    CHECK(p.wait_for_stderr("START long", 10s));
    CHECK(p.wait_for_stderr("[pto-par] pid " + std::to_string(p.pid()) + ", pool none", 1s));
    const pid_t guardian = session_leader_child(p.pid());
    REQUIRE(guardian > 0);
    const auto read = [](const std::string& path) {
        std::ifstream in(path);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        return text;
    };
    CHECK(read("/proc/" + std::to_string(guardian) + "/comm") == "pto-par-guard\n");
    // Under qemu-user the command line the kernel shows is the emulator's,
    // which the guest cannot change.
    if (read("/proc/" + std::to_string(p.pid()) + "/cmdline").starts_with(pto_par())) {
        const std::string cmdline = read("/proc/" + std::to_string(guardian) + "/cmdline");
        CHECK(cmdline.substr(0, cmdline.find('\0')) == "pto-par-guard of pid " + std::to_string(p.pid()));
        CHECK(cmdline.find("n.cmds") == std::string::npos);
    } else {
        MESSAGE("the guardian's command line is not checked: pto-par's own is not its argv (qemu-user?)");
    }
    p.send(SIGUSR1);
    CHECK(p.wait_for_stderr("[pto-par] status of pid " + std::to_string(p.pid()) + " after ", 10s));
    p.send(SIGINT);
    const auto r = p.wait(20s);
    CHECK(r.exit_code == 130);
}

TEST_CASE("a guardian killed under a run is replaced, and the new one stops the jobs when pto-par is SIGKILLed")
{
    for (const std::string contain : {"pgroup", "cgroup"}) {
        if (contain == "cgroup" && !cgroups_usable())
            continue;
        CAPTURE(contain);
        TempDir dir;
        const auto pidfile = dir.file("job.pid");
        Process p({pto_par(), "-d", "none", "--contain", contain,
                   dir.write("g.cmds", "@0,label=long sleep 300 & echo $! > " + pidfile + "; wait\n")});
        const pid_t job = wait_for_pid(dir, "job.pid", 10s);
        REQUIRE(job > 0);
        const pid_t first = session_leader_child(p.pid());
        REQUIRE(first > 0);
        kill(first, SIGKILL);
        CHECK(p.wait_for_stderr("took its place for the 1 running job", 10s));
        // Said once forked; in a session of its own a moment later.
        pid_t second = 0;
        for (int tries = 0; tries < 500 && (second = session_leader_child(p.pid())) <= 0; ++tries)
            std::this_thread::sleep_for(10ms);
        CHECK(second > 0);
        CHECK(second != first);
        p.send(SIGKILL);
        (void)p.wait(10s);
        CHECK(gone_within(job, 5s));
        if (process_alive(job))
            kill(job, SIGKILL);
    }
}

namespace {

// Whether a setuid-root helper can make a process pto-par (as `nobody`) may
// not signal; says why not when it cannot.
bool unkillable_usable()
{
    if (geteuid() != 0) {
        MESSAGE("skipped: making a setuid-root helper needs root");
        return false;
    }
    if (!subreaper_usable()) {
        // The same emulator runs a setuid program with the caller's rights.
        MESSAGE("skipped: qemu-user (no child subreaper here) does not run setuid programs as their owner");
        return false;
    }
    // A build under a directory others may not enter (/root) cannot be run as nobody.
    if (const auto probe = run({pto_par(), "--version"}, {}, {}, 10s, Setup::as_user(65534, 65534));
        probe.exit_code != 0) {
        const std::string why = std::string("skipped: user nobody cannot run ") + pto_par() + " (exit " +
                                std::to_string(probe.exit_code) + "; is a directory above it closed to others?)";
        MESSAGE(why);
        return false;
    }
    return true;
}

// A run as `nobody` whose first job, 'holder', leaves behind a copy of this
// binary, setuid root, that pto-par may not signal. Returns the run and the
// pid of what it could not stop (killed here).
std::pair<Finished, pid_t> run_with_unkillable_leftover(TempDir& dir, const std::vector<std::string>& extra)
{
    chmod(dir.path().c_str(), 0777);
    const auto helper = dir.file("unkillable");
    std::filesystem::copy_file("/proc/self/exe", helper);
    REQUIRE(chown(helper.c_str(), 0, 0) == 0);
    REQUIRE(chmod(helper.c_str(), 04755) == 0);
    const auto pidfile = dir.file("u.pid");
    const auto cmds = dir.write("q.cmds", "@1,label=holder " + helper + " --unkillable " + pidfile + " & while [ ! -s " +
                                              pidfile + " ]; do sleep 0.01; done\n" +
                                              "@1,label=next echo ran-on-a-held-device\n@0,label=free echo free\n");
    chmod(cmds.c_str(), 0644);
    std::vector<std::string> args{pto_par(), "-d", "3", "-j", "1", "--kill-grace", "0.5"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(cmds);
    const auto r = run(args, {}, {}, 30s, Setup::as_user(65534, 65534));
    const auto pid_text = dir.read("u.pid");
    if (pid_text.empty()) {
        const std::string why = "the setuid helper never wrote its pid, so there is nothing to test; pto-par exited " +
                                std::to_string(r.exit_code) + " and said: " + r.err;
        FAIL(why);
    }
    const pid_t stuck = static_cast<pid_t>(std::stol(pid_text));
    CHECK(process_alive(stuck));
    kill(stuck, SIGKILL);
    return {r, stuck};
}

}  // namespace

TEST_CASE("a leftover that cannot be stopped keeps its device out of the pool; what no longer fits is cancelled")
{
    if (!unkillable_usable())
        return;
    TempDir dir;
    const auto json = dir.file("r.json");
    const auto [r, stuck] = run_with_unkillable_leftover(dir, {"--json", json});
    CHECK(r.out.find("ran-on-a-held-device") == std::string::npos);
    CHECK(r.out.find("free") != std::string::npos);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("job 'holder' could not be stopped (pid " + std::to_string(stuck)) != std::string::npos);
    CHECK(r.err.find("devices 3 withheld for the rest of the run") != std::string::npos);
    CHECK(r.err.find("CANCEL next") != std::string::npos);
    CHECK(r.err.find("needs 1 device but only 0 remain usable (devices 3 withheld)") != std::string::npos);
    CHECK(r.err.find("PASS free") != std::string::npos);
}

TEST_CASE("what could not be stopped is not said to be stopped, nor to have left its process group")
{
    if (!unkillable_usable())
        return;
    TempDir dir;
    const auto [r, stuck] = run_with_unkillable_leftover(dir, {"--contain", "pgroup"});
    const auto holder = lines_with(r.err, "] PASS holder ");
    REQUIRE(holder.size() == 1);
    CHECK(holder[0].find("could not be stopped (pid " + std::to_string(stuck)) != std::string::npos);
    CHECK(holder[0].find("(stopped ") == std::string::npos);
    CHECK(r.err.find("left their job's process group") == std::string::npos);
}

TEST_CASE("a stopped job that is being stopped gets SIGCONT after SIGTERM, not a wait for SIGKILL")
{
    TempDir dir;
    const auto r = run({pto_par(), "-d", "none", "-j", "2", "-x", "--kill-grace", "20",
                        dir.write("stop.cmds", "@0,label=stopped kill -STOP $$\n@0,label=bad sleep 0.3; exit 1\n")},
                       {}, {}, 60s);
    CHECK(r.exit_code == 1);
    CHECK(r.seconds < 10);
    CHECK(r.err.find("KILLED stopped signal=SIGTERM") != std::string::npos);
}

TEST_CASE("a job that reads /dev/tty fails at once instead of stopping for ever")
{
    if (!pseudo_terminals_usable()) {
        MESSAGE("skipped: no pseudo-terminal can be opened here");
        return;
    }
    TempDir dir;
    Setup tty;
    tty.controlling_tty = true;
    const auto r = run({pto_par(), "-d", "none", "--timeout", "20", dir.write("tty.cmds", "@0,label=tty cat /dev/tty\n")},
                       {}, {}, 60s, tty);
    CHECK(r.exit_code == 1);
    CHECK(r.seconds < 10);
    CHECK(r.err.find("FAIL tty exit=1") != std::string::npos);
}

TEST_CASE("one verdict for one line: a plain command and the same in a compound give the shell's answer")
{
    TempDir dir;
    const auto script = dir.write("segv.sh", "#!/bin/sh\nkill -SEGV $$\n");
    chmod(script.c_str(), 0755);
    const auto r = run({pto_par(), "-d", "none", "-j", "1",
                        dir.write("v.cmds", "@0,label=plain " + script + "\n@0,label=compound { " + script + "; }\n")});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("FAIL plain exit=139") != std::string::npos);
    CHECK(r.err.find("FAIL compound exit=139") != std::string::npos);
    CHECK(lines_with(r.out, "Segmentation fault").size() == 2);
}

TEST_CASE("-v and --dry-run say which containment is in force")
{
    TempDir dir;
    const auto file = dir.write("c.cmds", "@0 true\n");
    const auto pg = run({pto_par(), "-v", "-d", "none", "--contain", "pgroup", file});
    CHECK(pg.err.find("jobs contained by process groups") != std::string::npos);
    const auto dry = run({pto_par(), "-n", "-d", "none", "--contain", "pgroup", file});
    CHECK(dry.out.find("# jobs contained by process groups") != std::string::npos);
    if (cgroups_usable()) {
        const auto cg = run({pto_par(), "-v", "-d", "none", file});
        CHECK(cg.err.find("jobs contained by cgroup v2") != std::string::npos);
    }
    const auto bad = run({pto_par(), "--contain", "jail", file});
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find("--contain: expected auto, cgroup or pgroup") != std::string::npos);
}

}
