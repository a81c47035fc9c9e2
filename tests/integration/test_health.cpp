#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "process.hpp"
#include "reports.hpp"

using namespace pto::test;
using namespace std::chrono_literals;


TEST_SUITE("health") {

TEST_CASE("a device whose check fails after a job failed on it is withheld, and the job passes elsewhere")
{
    TempDir dir;
    // The device c first runs on turns sick as c fails there; its check says so.
    const auto broke = dir.file("broke");
    const auto check = dir.write("check.sh", "echo \"checking $PTO_PAR_DEVICES\"\n"
                                             "[ -e " + broke + " ] && [ \"$(cat " + broke +
                                             ")\" = \"$PTO_PAR_DEVICES\" ] && { echo 'ECC errors'; exit 1; }\nexit 0\n");
    const auto file = dir.write("j.cmds", "@label=a sleep 0.3\n@label=b sleep 0.3\n"
                                          "@label=c if [ ! -e " + broke + " ]; then echo $PTO_PAR_DEVICES > " + broke +
                                          "; exit 1; fi; echo fine on $PTO_PAR_DEVICES\n"
                                          "@label=d sleep 0.1\n@4,label=all true\n");
    const auto json = dir.file("r.json");
    const auto r = run({pto_par(), "-d", "0-3", "-j", "3", "--device-check", "sh " + check, "--json", json, file});
    CHECK(r.exit_code == 1);  // 'all' cannot run any more
    const std::string sick = dir.read("broke").substr(0, 1);
    CHECK(r.err.find("[pto-par] SICK device " + sick + ": its check exited 1; withheld for the rest of the run; "
                     "its check printed:\nchecking " + sick + "\nECC errors\n[pto-par] end of the check of device " +
                     sick + "\n") != std::string::npos);
    CHECK(r.err.find("[pto-par] RETRY c exit=1 ") != std::string::npos);
    CHECK(r.err.find("(device " + sick + " failed the health check; running it again on other devices)") !=
          std::string::npos);
    CHECK(r.err.find("[pto-par] PASS c exit=0") != std::string::npos);
    CHECK(r.err.find("[pto-par] CANCEL all: needs 4 devices but only 3 remain usable (device " + sick + " sick)") !=
          std::string::npos);
    CHECK(r.out.find("fine on ") != std::string::npos);
    CHECK(r.out.find("fine on " + sick) == std::string::npos);
    const auto report = dir.read("r.json");
    // Passed, not flaky: the failed try was the device's; the try is kept.
    CHECK(report.find("\"status\":\"passed\",\"exit_code\":0") != std::string::npos);
    CHECK(report.find("\"devices\":[" + sick + "],") != std::string::npos);
    CHECK(report.find("\"sick\":[" + sick + "]}") != std::string::npos);
    CHECK(report.find("flaky") == std::string::npos);
    // The device statistics know it too: the end-of-run line and the record.
    CHECK(r.err.find("[pto-par] device " + sick + ": 1 job, 0 passed, 1 failed, 0 timed out, sick\n") !=
          std::string::npos);
    CHECK(report.find("{\"record\":\"device\",\"device\":" + sick + ",") != std::string::npos);
    CHECK(report.find("\"sick\":true}") != std::string::npos);
}

TEST_CASE("every device is checked before its first job, and a sick one never gets a job")
{
    TempDir dir;
    const auto file = dir.write("j.cmds", "echo on $PTO_PAR_DEVICES\necho on $PTO_PAR_DEVICES\n"
                                          "echo on $PTO_PAR_DEVICES\n@0 echo none\n");
    const auto r = run({pto_par(), "-d", "0-1", "--device-check", "test {devices} != 1 || { echo dead; exit 3; }",
                        file});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("on 1") == std::string::npos);
    CHECK(r.out.find("on 0\non 0\non 0\n") != std::string::npos);
    CHECK(r.err.find("[pto-par] SICK device 1: its check exited 3; withheld for the rest of the run; its check "
                     "printed:\ndead\n") != std::string::npos);
}

TEST_CASE("a failure on a device whose check passes is the job's own: reported, the device used again")
{
    TempDir dir;
    const auto file = dir.write("j.cmds", "@label=bad exit 4\n@label=next echo on $PTO_PAR_DEVICES\n");
    const auto r = run({pto_par(), "-d", "5", "--device-check", "true", file});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("[pto-par] FAIL bad exit=4") != std::string::npos);
    CHECK(r.err.find("RETRY") == std::string::npos);
    CHECK(r.out == "on 5\n");
}

TEST_CASE("a slow check delays no other job's start or time limit; one past its limit makes the device sick")
{
    TempDir dir;
    const auto file = dir.write("j.cmds", "@0,label=free true\n@1,label=first true\n"
                                          "@1,label=hang,timeout=1 sleep 30\n");
    const auto json = dir.file("r.json");
    const auto r = run({pto_par(), "-d", "0-1", "--device-check", "[ {devices} = 0 ] || sleep 30",
                        "--device-check-timeout", "2", "--dump-grace", "0.2", "--kill-grace", "0.5", "--json", json,
                        file});
    CHECK(r.exit_code == 1);
    auto at = report_starts(dir.read("r.json"));
    CHECK(at["first"] < 1.0);  // on device 0, while device 1's check runs
    CHECK(r.err.find("[pto-par] TIMEOUT hang signal=") != std::string::npos);
    CHECK(r.err.find("[pto-par] SICK device 1: its check ran past --device-check-timeout (2s)") != std::string::npos);
    // The hang's own limit was kept while the check ran: its try ended about 1 s
    // after it started, not after the check.
    const auto report = dir.read("r.json");
    const auto hang = report.find("\"label\":\"hang\"");
    REQUIRE(hang != std::string::npos);
    const auto d = report.find("\"duration_s\":", hang);
    CHECK(std::stod(report.substr(d + 13)) < 1.9);
}

TEST_CASE("--device-check with nothing to run is a usage error; with --launcher slurm it is not")
{
    TempDir dir;
    const auto file = dir.write("j.cmds", "true\n");
    auto r = run({pto_par(), "-d", "0", "--device-check", " ", file});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--device-check needs a command") != std::string::npos);
    // Outside an allocation only that is wrong (the steps check their GPUs:
    // tests/slurm's sick scenarios).
    r = run({pto_par(), "--launcher", "slurm", "--device-check", "true", file}, {}, {"SLURM_JOB_ID="});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("does not go with") == std::string::npos);
    CHECK(r.err.find("inside a Slurm allocation") != std::string::npos);
    r = run({pto_par(), "-d", "0", "--device-check", "true", "--device-check-timeout", "x", file});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--device-check-timeout") != std::string::npos);
}


// A check is contained and ended as a job is: what its shell leaves behind
// is stopped when the shell exits (it held the check's pipe, and the run
// waited for it for ever).
TEST_CASE("a check that leaves a process behind passes; the process is stopped and the jobs run")
{
    for (const std::string contain : {"auto", "pgroup"}) {
        CAPTURE(contain);
        TempDir dir;
        const auto pidfile = dir.file("left");
        const auto file = dir.write("j.cmds", "echo on $PTO_PAR_DEVICES\necho on $PTO_PAR_DEVICES\n");
        const auto r = run({pto_par(), "-d", "0-1", "--lock-dir", "none", "--contain", contain,
                            "--device-check-timeout", "30", "--device-check",
                            "bash -c 'echo $$ > " + pidfile + "-{devices}; exec -a X sleep 100' & "
                            "until [ -s " + pidfile + "-{devices} ]; do sleep 0.01; done; exit 0",
                            file},
                           {}, {}, 20s);
        INFO(r.err);
        CHECK(r.exit_code == 0);
        CHECK(r.err.find("SICK") == std::string::npos);
        CHECK(r.err.find("[pto-par] the check of device 0 left 1 process running after its shell exited; stopped it") !=
              std::string::npos);
        CHECK((r.out == "on 0\non 0\n" || r.out == "on 0\non 1\n" || r.out == "on 1\non 0\n" || r.out == "on 1\non 1\n"));
        for (const char* device : {"0", "1"})
            CHECK(gone_within(std::stoi(dir.read(std::string("left-") + device)), 2s));
    }
}

TEST_CASE("a check whose leftover ignores SIGTERM is killed after the kill grace, and the run ends")
{
    TempDir dir;
    const auto file = dir.write("j.cmds", "echo ran\n");
    const auto r = run({pto_par(), "-d", "0", "--lock-dir", "none", "--kill-grace", "0.3", "--device-check",
                        "sh -c 'trap \"\" TERM; while :; do sleep 0.05; done' & exit 0", file},
                       {}, {}, 20s);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out == "ran\n");
}

TEST_CASE("SIGUSR1 names the device checks that run")
{
    TempDir dir;
    const auto began = dir.file("began");
    const auto file = dir.write("j.cmds", "true\n");
    Process p({pto_par(), "-d", "3", "--lock-dir", "none", "--device-check", "touch " + began + "; sleep 2", file});
    for (int i = 0; i < 200 && access(began.c_str(), F_OK) != 0; ++i)
        std::this_thread::sleep_for(20ms);
    p.send(SIGUSR1);
    CHECK(p.wait_for_stderr("0 running, 1 queued, 0 finished, 1 device check\n", 10s));
    CHECK(p.wait_for_stderr("[pto-par]   check of device 3 pid=", 10s));
    const auto r = p.wait(20s);
    CHECK(r.exit_code == 0);
}

}
