// Leases across runs: two pto-par runs on one machine never hold the same
// device or port at once. Every test leases in a lock directory of its own
// (--lock-dir), never in /run/lock, so that tests running beside each
// other, and CI runners on the machine, are out of each other's way.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <csignal>
#include <memory>
#include <string>
#include <thread>

#include <sys/wait.h>

#include "process.hpp"
#include "reports.hpp"

using namespace pto::test;
using namespace std::chrono_literals;

namespace {

// `count` jobs labelled PREFIXn that each write "WHAT BEGIN END LABEL" to
// `records` for the time they hold WHAT.
std::string holding_jobs(const std::string& prefix, int count, const std::string& head, const std::string& what,
                         const std::string& records)
{
    std::string cmds;
    for (int i = 1; i <= count; ++i)
        cmds += head + ",label=" + prefix + std::to_string(i) +
                " b=$(date +%s.%N); sleep 0.05; e=$(date +%s.%N); echo \"" + what +
                " $b $e $PTO_PAR_LABEL\" >> " + records + "\n";
    return cmds;
}

// Two runs of 40 jobs started at once with `args`, each job holding `what`
// (as its shell expands it) by `head`: both finish, and no two holds of
// one thing overlap.
void two_runs(const std::string& head, const std::string& what, std::vector<std::string> args)
{
    TempDir dir;
    const auto records = dir.file("holds");
    args.insert(args.begin(), pto_par());
    args.insert(args.end(), {"--lock-dir", dir.file("locks")});
    std::vector<std::string> a = args;
    std::vector<std::string> b = args;
    a.push_back(dir.write("a.cmds", holding_jobs("a", 40, head, what, records)));
    b.push_back(dir.write("b.cmds", holding_jobs("b", 40, head, what, records)));
    Process first(a);
    Process second(b);
    const auto ra = first.wait(60s);
    const auto rb = second.wait(60s);
    INFO("first: " << ra.err);
    INFO("second: " << rb.err);
    CHECK(ra.exit_code == 0);
    CHECK(rb.exit_code == 0);
    CHECK(lines_with(ra.err, "] PASS ").size() == 40);
    CHECK(lines_with(rb.err, "] PASS ").size() == 40);
    const std::string holds = dir.read("holds");
    CHECK(lines_with(holds, " ").size() == 80);
    const auto overlaps = overlapping_holds(holds);
    CHECK_MESSAGE(overlaps.empty(), overlaps.size() << " overlaps, the first: " << overlaps.front());
}

// Jobs of `sizes` devices in turn, `count` of them, each a short sleep.
std::string mixed_jobs(const std::string& prefix, int count, const std::vector<int>& sizes)
{
    std::string cmds;
    for (int i = 0; i < count; ++i)
        cmds += "@" + std::to_string(sizes[static_cast<std::size_t>(i) % sizes.size()]) + ",label=" + prefix +
                std::to_string(i + 1) + " sleep 0.0" + std::to_string(1 + i % 3) + "\n";
    return cmds;
}

// Runs started at once on one lock directory, `tries` times: every try of
// every run ends, well within `limit` (a run that waits for another run
// that waits for it would sit there for ever).
void runs_end(const std::vector<std::pair<std::string, std::vector<int>>>& runs, int jobs, int tries,
              std::chrono::milliseconds limit)
{
    for (int t = 0; t < tries; ++t) {
        TempDir dir;
        std::vector<std::unique_ptr<Process>> started;
        for (std::size_t r = 0; r < runs.size(); ++r) {
            const std::string name = std::string(1, static_cast<char>('a' + r));
            started.push_back(std::make_unique<Process>(std::vector<std::string>{
                pto_par(), "-d", runs[r].first, "--lock-dir", dir.file("locks"),
                dir.write(name + ".cmds", mixed_jobs(name, jobs, runs[r].second))}));
        }
        // Until each has ended or the limit passed; none is reaped yet, so
        // that a stuck one can still be asked what it waits for.
        const auto end = std::chrono::steady_clock::now() + limit;
        const auto ended = [](const Process& p) {
            siginfo_t info{};
            return waitid(P_PID, static_cast<id_t>(p.pid()), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                   info.si_pid == p.pid();
        };
        while (std::chrono::steady_clock::now() < end &&
               !std::all_of(started.begin(), started.end(), [&](const auto& p) { return ended(*p); }))
            std::this_thread::sleep_for(50ms);
        // What every run and the lock directory say when one is stuck.
        std::string state;
        if (!std::all_of(started.begin(), started.end(), [&](const auto& p) { return ended(*p); })) {
            for (const auto& p : started)
                if (!ended(*p)) {
                    p->send(SIGUSR1);
                    (void)p->wait_for_stderr("status of pid", 2s);
                }
            state = "lock directory:\n" +
                    run({"/bin/sh", "-c", "cd \"$0\" && for f in *; do echo \"$f: $(cat \"$f\")\"; done; cat /proc/locks",
                         dir.file("locks")})
                        .out;
        }
        std::vector<Finished> finished;
        for (auto& p : started) {
            // The limit counts from its start: a few seconds more for what
            // it printed since.
            finished.push_back(p->wait(limit + 3s));
            state += "\nrun (pid " + std::to_string(p->pid()) + "): " + finished.back().err;
        }
        for (std::size_t r = 0; r < finished.size(); ++r) {
            const auto& f = finished[r];
            INFO("try " << t + 1 << ", run " << r + 1);
            INFO(state);
            REQUIRE(!f.timed_out);
            CHECK(f.exit_code == 0);
        }
    }
}

// A holder of the lease file `lease` (it prints "locked") that unlocks it
// without a close, which makes no event, `after` seconds after a file
// matching `when` (a glob) is there, prints "unlocked" and keeps the file
// open a minute.
std::vector<std::string> unlocking_holder(const std::string& lease, const std::string& when,
                                          const std::string& after = "0")
{
    return {"/usr/bin/python3", "-c",
            "import fcntl, glob, sys, time\n"
            "f = open(sys.argv[1], 'w')\n"
            "fcntl.flock(f, fcntl.LOCK_EX)\n"
            "print('locked', flush=True)\n"
            "while not glob.glob(sys.argv[2]):\n"
            "    time.sleep(0.001)\n"
            "time.sleep(float(sys.argv[3]))\n"
            "fcntl.flock(f, fcntl.LOCK_UN)\n"
            "print('unlocked', flush=True)\n"
            "time.sleep(60)\n",
            lease, when, after};
}

}  // namespace

TEST_SUITE("leases_order") {

TEST_CASE("three runs on one lock dir, two of -d 0-2 and one of -d 1-2, never wait for each other for ever")
{
    runs_end({{"0-2", {1, 2, 3}}, {"0-2", {2, 3, 1}}, {"1-2", {1, 2}}}, 30, 8, 20s);
}

TEST_CASE("two runs on -d 0-1 with jobs of one and two devices never wait for each other for ever")
{
    runs_end({{"0-1", {1, 2}}, {"0-1", {2, 1}}}, 30, 12, 20s);
}

TEST_CASE("a run with nothing running whose lease is given back without a close still starts, in a while")
{
    // A holder that unlocks and keeps the file open makes no event (as a
    // run's own try does, which takes a lease and gives it back when the
    // next is busy): the waiting run must not wait until the file closes.
    TempDir dir;
    const auto locks = dir.file("locks");
    std::filesystem::create_directory(locks);
    Process holder(unlocking_holder(locks + "/device-0", dir.file("unlock")));
    REQUIRE(holder.wait_for_stdout("locked", 10s));
    Process waiter({pto_par(), "-d", "0", "--lock-dir", locks, dir.write("w.cmds", "@1,label=w true\n")});
    CHECK(waiter.wait_for_stderr("WAIT w for device 0 (held by another run)", 10s));
    dir.write("unlock", "");
    const auto r = waiter.wait(30s);
    INFO(r.err);
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code == 0);
    holder.send(SIGKILL);
}

TEST_CASE("a lease held only for an instant, as by another run's try that finds its next lease busy, delays a run "
          "with a job running by no more than an instant")
{
    // Another run's try takes the leases of a job in turn and gives back
    // what it took, unlocked without a close, when a later one is busy: a
    // run whose try came in that instant found it held and waited for a
    // close that never came, until its own job ended (here in 60 s). The
    // holder here gives the lease back as soon as the run has found it
    // busy (its claim appears), as such a try would.
    TempDir dir;
    const auto locks = dir.file("locks");
    std::filesystem::create_directory(locks);
    Process holder(unlocking_holder(locks + "/device-1", locks + "/want-device-1@*"));
    REQUIRE(holder.wait_for_stdout("locked", 10s));
    Process waiter({pto_par(), "-d", "0-1", "--lock-dir", locks,
                    dir.write("w.cmds", "@1,label=first sleep 60\n@1,label=second sleep 60\n")});
    REQUIRE(holder.wait_for_stdout("unlocked", 10s));
    CHECK(waiter.wait_for_stderr("START first", 5s));
    CHECK(waiter.wait_for_stderr("START second", 5s));
    waiter.send(SIGINT);
    INFO(waiter.wait(20s).err);
    holder.send(SIGKILL);
}

TEST_CASE("a lease held for an instant when a job of the run ends gets its second look, though a look came before "
          "while the run could start nothing")
{
    // The first try's look comes while `long` and `z` fill -j 2, and the
    // pass it wakes tries nothing. `z` ends as the holder takes its instant:
    // that try found the lease held and, the look spent, `need1` waited
    // for `long`'s end (60 s).
    TempDir dir;
    const auto locks = dir.file("locks");
    std::filesystem::create_directory(locks);
    const auto instant = dir.file("instant");
    Process holder(unlocking_holder(locks + "/device-1", instant, "0.05"));
    REQUIRE(holder.wait_for_stdout("locked", 10s));
    Process waiter({pto_par(), "-d", "0-1", "-j", "2", "--lock-dir", locks,
                    dir.write("w.cmds", "@1,label=long sleep 60\n@1,label=need1 true\n@0,label=z sh -c 'sleep 1; touch " +
                                            instant + "'\n")});
    REQUIRE(waiter.wait_for_stderr("WAIT need1", 10s));
    REQUIRE(holder.wait_for_stdout("unlocked", 10s));
    CHECK(waiter.wait_for_stderr("START need1", 5s));
    waiter.send(SIGINT);
    INFO(waiter.wait(20s).err);
    holder.send(SIGKILL);
}

TEST_CASE("a run with nothing running is not kept waiting for ever by a stopped run that waited first")
{
    TempDir dir;
    const auto locks = dir.file("locks");
    Process holder({pto_par(), "-d", "0", "--lock-dir", locks, dir.write("a.cmds", "@1,label=hold sleep 1\n")});
    REQUIRE(holder.wait_for_stderr("START hold", 10s));
    Process first({pto_par(), "-v", "-d", "0", "--lock-dir", locks, dir.write("s.cmds", "@1,label=first true\n")});
    REQUIRE(first.wait_for_stderr("WAIT first", 10s));
    // ^Z: it waits first, and takes nothing while it is stopped.
    first.send(SIGSTOP);
    CHECK(holder.wait(20s).exit_code == 0);
    const auto later = run({pto_par(), "-d", "0", "--lock-dir", locks, dir.write("c.cmds", "@1,label=later true\n")},
                           {}, {}, 30s);
    INFO(later.err);
    CHECK_FALSE(later.timed_out);
    CHECK(later.exit_code == 0);
    first.send(SIGCONT);
    const auto f = first.wait(30s);
    INFO(f.err);
    CHECK(f.exit_code == 0);
}

}

TEST_SUITE("leases") {

TEST_CASE("two runs started at once on -d 0-3 never hold one device at once, and both finish")
{
    two_runs("@1", "dev$PTO_PAR_DEVICES", {"-d", "0-3"});
}

TEST_CASE("two runs started at once with --ports never hand out one port at once, and both finish")
{
    two_runs("@0,ports=1", "port$PTO_PAR_PORT", {"-d", "none", "-j", "4", "--ports", "40100-40103"});
}

TEST_CASE("a job waiting for another run's device: its WAIT line and SIGUSR1 name the device and the holder's pid")
{
    for (const bool verbose : {false, true}) {
        CAPTURE(verbose);
        TempDir dir;
        const auto locks = dir.file("locks");
        // The holder holds until told: however slow the machine, the waiter
        // is asked while it waits.
        Process holder({pto_par(), "-d", "0", "--lock-dir", locks, dir.write("a.cmds", "@1,label=long sleep 60\n")});
        REQUIRE(holder.wait_for_stderr("START long", 10s));
        std::vector<std::string> argv{pto_par(), "-d", "0", "--lock-dir", locks,
                                      dir.write("b.cmds", "@1,label=short true\n")};
        if (verbose)
            argv.insert(argv.begin() + 1, "-v");
        Process waiter(argv);
        const std::string said = "device 0 (held by another run, pid " + std::to_string(holder.pid()) + ")";
        CHECK(waiter.wait_for_stderr("WAIT short for " + said, 10s));
        waiter.send(SIGUSR1);
        CHECK(waiter.wait_for_stderr("short waits for " + said, 10s));
        CHECK_FALSE(waiter.wait_for_stderr("START short", 300ms));
        holder.send(SIGTERM);
        const auto a = holder.wait(20s);
        const auto b = waiter.wait(20s);
        INFO(b.err);
        CHECK(a.exit_code == 128 + SIGTERM);
        CHECK(b.exit_code == 0);
        // It started once the first run had given the device back.
        CHECK(b.err.find("START short") != std::string::npos);
        CHECK(lines_with(b.err, "WAIT short").size() == 1);
    }
}

TEST_CASE("a holder in another PID namespace is named as such, not as a pid of ours")
{
    if (geteuid() != 0 || access("/usr/bin/unshare", X_OK) != 0) {
        MESSAGE("skipped: a PID namespace needs root and unshare(1)");
        return;
    }
    TempDir dir;
    const auto locks = dir.file("locks");
    Process holder({"/usr/bin/unshare", "--pid", "--fork", pto_par(), "-d", "0", "--lock-dir", locks,
                    dir.write("a.cmds", "@1,label=long sleep 60\n")});
    if (!holder.wait_for_stderr("START long", 10s)) {
        MESSAGE("skipped: unshare --pid does not work here");
        return;
    }
    const auto plan = run({pto_par(), "-n", "-d", "0", "--lock-dir", locks, dir.write("b.cmds", "@1 true\n")});
    CHECK(plan.out.find("device 0 (pid 1 in another PID namespace)") != std::string::npos);
    Process waiter({pto_par(), "-d", "0", "--lock-dir", locks, dir.write("c.cmds", "@1,label=short true\n")});
    CHECK(waiter.wait_for_stderr("WAIT short for device 0 (held by another run, pid 1 in another PID namespace)", 10s));
    // unshare(1) ignores SIGTERM: its child, pto-par, gets it.
    std::ifstream children("/proc/" + std::to_string(holder.pid()) + "/task/" + std::to_string(holder.pid()) +
                           "/children");
    pid_t inner = 0;
    children >> inner;
    REQUIRE(inner > 0);
    kill(inner, SIGTERM);
    (void)holder.wait(20s);
    CHECK(waiter.wait(20s).exit_code == 0);
}

TEST_CASE("a run that gives a device back while another run waits for it lets that run have it")
{
    TempDir dir;
    const auto locks = dir.file("locks");
    const auto order = dir.file("order");
    // One device; the first run has 30 jobs for it, the second one job;
    // each job writes its label in the order they ran.
    std::string many;
    for (int i = 1; i <= 30; ++i)
        many += "@1,label=a" + std::to_string(i) + " echo $PTO_PAR_LABEL >> " + order + "; sleep 0.1\n";
    Process first({pto_par(), "-d", "0", "--lock-dir", locks, dir.write("a.cmds", many)});
    REQUIRE(first.wait_for_stderr("START a1", 10s));
    Process second({pto_par(), "-v", "-d", "0", "--lock-dir", locks,
                    dir.write("b.cmds", "@1,label=b echo $PTO_PAR_LABEL >> " + order + "\n")});
    // Counted from when it began to wait: how long it took to start and get
    // there is the machine's, not the turns'.
    REQUIRE(second.wait_for_stderr("WAIT b", 20s));
    const auto before = static_cast<long>(lines_with(dir.read("order"), "").size());
    const auto b = second.wait(30s);
    const auto a = first.wait(30s);
    INFO(a.err);
    INFO(b.err);
    CHECK(a.exit_code == 0);
    CHECK(b.exit_code == 0);
    const auto ran = lines_with(dir.read("order"), "");
    REQUIRE(ran.size() == 31);
    // Not taken straight back job after job: the waiting run's job came
    // after a few of the first run's, not after all of them.
    const auto at = std::find(ran.begin(), ran.end(), "b") - ran.begin();
    CHECK_MESSAGE(at <= before + 3,
                  "the second run's job ran " << at + 1 << "th, " << before << " of the first's having run when it began to wait");
}

TEST_CASE("a lease file removed or replaced while held, or its whole lock dir, lets no second run onto the device")
{
    // A new file renamed onto the name, as mv, sed -i and config tools
    // write: no file was removed, and the name is a file no one locks.
    enum class Under { file_removed, dir_removed, file_renamed_onto };
    for (const Under under : {Under::file_removed, Under::dir_removed, Under::file_renamed_onto}) {
        TempDir dir;
        const auto locks = dir.file("locks");
        const auto records = dir.file("holds");
        const auto hold = [&](const std::string& label, const std::string& seconds) {
            return "@1,label=" + label + " b=$(date +%s.%N); sleep " + seconds +
                   "; e=$(date +%s.%N); echo \"dev$PTO_PAR_DEVICES $b $e $PTO_PAR_LABEL\" >> " + records + "\n";
        };
        Process a({pto_par(), "-d", "0", "--lock-dir", locks, dir.write("a.cmds", hold("a", "2"))});
        REQUIRE(a.wait_for_stderr("START a", 10s));
        // Its files hold dead pids and look like stale pid files: people
        // clean them. (rm -rf may fail to remove the directory, which the
        // run has made its lease in again.)
        if (under == Under::file_renamed_onto)
            (void)run({"/bin/mv", dir.write("new", ""), locks + "/device-0"});
        else
            (void)run({"/bin/rm", "-rf", under == Under::dir_removed ? locks : locks + "/device-0"});
        const auto b = run({pto_par(), "-d", "0", "--lock-dir", locks, dir.write("b.cmds", hold("b", "0.2"))});
        const auto fa = a.wait(20s);
        INFO("under: " << static_cast<int>(under));
        INFO(fa.err);
        INFO(b.err);
        CHECK(fa.exit_code == 0);
        CHECK(b.exit_code == 0);
        const auto overlaps = overlapping_holds(dir.read("holds"));
        CHECK_MESSAGE(overlaps.empty(), overlaps.size() << " overlaps, the first: " << overlaps.front());
    }
}

TEST_CASE("an unusable lease file leaves its device out with a notice; the jobs run on the others")
{
    TempDir dir;
    const auto locks = dir.file("locks");
    REQUIRE(run({"/bin/mkdir", "-p", locks + "/device-0"}).exit_code == 0);
    REQUIRE(run({"/bin/ln", "-s", "/etc/passwd", locks + "/device-1"}).exit_code == 0);
    const auto cmds = dir.write("t.cmds", "@1 echo on=$PTO_PAR_DEVICES\n@1 echo on=$PTO_PAR_DEVICES\n");
    const auto r = run({pto_par(), "-d", "0-2", "--lock-dir", locks, cmds});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(lines_with(r.err, "] PASS ").size() == 2);
    CHECK(lines_with(r.out, "on=2").size() == 2);
    CHECK(lines_with(r.err, "device 0 is left out").size() == 1);
    CHECK(lines_with(r.err, "device 1 is left out").size() == 1);
    CHECK(r.err.find(locks + "/device-0") != std::string::npos);
    // With no device left the jobs are cancelled, not failed: they never ran.
    const auto none = run({pto_par(), "-d", "0", "--lock-dir", locks, "--json", dir.file("r.json"), cmds});
    INFO(none.err);
    CHECK(none.exit_code == 1);
    CHECK(lines_with(none.err, "] FAIL ").empty());
    CHECK(lines_with(none.err, "] CANCEL ").size() == 2);
}

TEST_CASE("--dry-run says which of its devices and ports another run holds now, and by which pid")
{
    TempDir dir;
    const auto locks = dir.file("locks");
    const auto plan = [&] {
        return run({pto_par(), "-n", "-d", "0-3", "--ports", "41000-41009", "--lock-dir", locks,
                    dir.write("b.cmds", "@1,ports=2 true\n")});
    };
    // Nothing held: nothing said.
    auto quiet = plan();
    CHECK(quiet.exit_code == 0);
    CHECK(quiet.out.find("held now") == std::string::npos);
    Process holder({pto_par(), "-d", "2", "--ports", "41000-41009", "--lock-dir", locks,
                    dir.write("a.cmds", "@1,ports=2,label=long sleep 60\n")});
    REQUIRE(holder.wait_for_stderr("START long", 10s));
    const auto r = plan();
    CHECK(r.exit_code == 0);
    const auto pid = std::to_string(holder.pid());
    CHECK(r.out.find("# held now by other runs (jobs wait for them): device 2 (pid " + pid + "), port 41000 (pid " +
                     pid + "), port 41001 (pid " + pid + ")\n") != std::string::npos);
    holder.send(SIGTERM);
    CHECK(holder.wait(20s).exit_code == 128 + SIGTERM);
}

TEST_CASE("a nested run uses its job's leased device and ports and never waits for them")
{
    TempDir dir;
    const auto locks = dir.file("locks");
    const auto inner = dir.write("inner.cmds", "@1,ports=2,label=inner echo inner $PTO_PAR_DEVICES $PTO_PAR_PORTS $PTO_PAR_LOCK_DIR\n");
    // Neither --ports nor --lock-dir inside: a nested run's range is its
    // job's $PTO_PAR_PORTS, and it leases where its outer run does.
    const auto outer = dir.write("outer.cmds", "@1,ports=2,label=outer " + pto_par() + " " + inner + "\n");
    const auto r = run({pto_par(), "-d", "2-3", "--ports", "40200-40209", "--lock-dir", locks, outer}, {}, {}, 20s);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("inner 2 40200-40201 " + locks + "\n") != std::string::npos);
}

TEST_CASE("a device another run leases when the checks begin is checked before its first job here")
{
    TempDir dir;
    const auto locks = dir.file("locks");
    const auto log = dir.file("log");
    Process holder({pto_par(), "-d", "0", "--lock-dir", locks, dir.write("a.cmds", "@1,label=long sleep 1.5\n")});
    REQUIRE(holder.wait_for_stderr("START long", 10s));
    const auto r = run({pto_par(), "-d", "0-1", "--lock-dir", locks, "--device-check",
                        "echo check $PTO_PAR_DEVICES >> " + log,
                        dir.write("b.cmds", "@2,label=both echo job $PTO_PAR_DEVICES >> " + log + "\n")},
                       {}, {}, 20s);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(holder.wait(20s).exit_code == 0);
    const std::string got = dir.read("log");
    INFO(got);
    const auto job = got.find("job 0,1");
    REQUIRE(job != std::string::npos);
    CHECK(got.find("check 0") < job);
    CHECK(got.find("check 1") < job);
}

TEST_CASE("a run past its time limit waits for no lease: another run takes the device at once")
{
    TempDir dir;
    const auto locks = dir.file("locks");
    Process holder({pto_par(), "-d", "0", "--lock-dir", locks, dir.write("h.cmds", "@1,label=hold sleep 2\n")});
    REQUIRE(holder.wait_for_stderr("START hold", 10s));
    // `wait` waits for device 0, held by the holder; the run's limit passes
    // while it waits, and `slow` then takes 5 s to stop (it ignores its dump
    // signal and SIGTERM): the run starts nothing more, and must not keep
    // others from the device all that time.
    Process late({pto_par(), "-j", "2", "-d", "0", "--lock-dir", locks, "--timeout", "1", "--dump-grace", "4",
                  "--kill-grace", "1", dir.write("a.cmds", "@0,label=slow trap '' USR1 TERM; sleep 30\n@1,label=wait true\n")});
    REQUIRE(late.wait_for_stderr("stopping", 10s));
    CHECK(holder.wait(20s).exit_code == 0);
    const auto b = run({pto_par(), "-v", "-d", "0", "--lock-dir", locks, dir.write("b.cmds", "@1,label=b true\n")},
                       {}, {}, 20s);
    INFO(b.err);
    CHECK(b.exit_code == 0);
    CHECK(b.err.find("left to another run") == std::string::npos);
    const auto a = late.wait(20s);
    INFO(a.err);
    CHECK(a.exit_code == 124);
}

}  // TEST_SUITE
