#include <doctest/doctest.h>

#include <map>
#include <random>
#include <set>
#include <sstream>

#include "process.hpp"
#include "reports.hpp"

using namespace pto::test;

namespace {

// Replays the status lines with the slot rule: a job labelled s* holds one
// slot per unit of its slots= on its one device, any other job all of its
// devices. Fails if a device has more than `slots` slots taken, or a
// whole-device job shares its device with anything. Returns, per device,
// the most slot jobs seen on it at once.
std::map<int, std::size_t> check_slots(const std::string& err, std::size_t slots,
                                       const std::map<std::string, std::size_t>& slot_need)
{
    std::map<std::string, std::pair<int, std::size_t>> running;  // label -> device, slots held (0: whole)
    std::map<std::string, std::vector<int>> whole;
    std::map<int, std::size_t> taken;  // device -> slots taken
    std::map<int, std::size_t> sharing, most;
    std::istringstream in(err);
    for (std::string line; std::getline(in, line);) {
        std::istringstream words(line);
        std::string tag, word, label;
        words >> tag >> word >> label;
        if (tag != "[pto-par]")
            continue;
        const std::vector<int> devices = status_devices(line);
        const auto need = slot_need.find(label);
        if (word == "START") {
            if (need != slot_need.end()) {
                REQUIRE_MESSAGE(devices.size() == 1, "a slot job sees one device: " << line);
                taken[devices[0]] += need->second;
                CHECK_MESSAGE(taken[devices[0]] <= slots, "device " << devices[0] << " over its slots at: " << line);
                most[devices[0]] = std::max(most[devices[0]], ++sharing[devices[0]]);
            } else {
                for (int d : devices) {
                    CHECK_MESSAGE(taken[d] == 0, "whole device " << d << " shared at: " << line);
                    taken[d] = slots;
                }
                whole[label] = devices;
            }
        } else if (word == "PASS" || word == "FAIL" || word == "KILLED" || word == "TIMEOUT") {
            if (need != slot_need.end()) {
                REQUIRE(devices.size() == 1);
                taken[devices[0]] -= need->second;
                --sharing[devices[0]];
            } else {
                for (int d : whole[label])
                    taken[d] = 0;
            }
        }
    }
    return most;
}

}  // namespace

TEST_SUITE("slots") {

TEST_CASE("8 jobs of one slot on 2 devices of 4 slots run all at once, 4 on each device")
{
    TempDir dir;
    std::string cmds;
    std::map<std::string, std::size_t> need;
    // Each waits (10 s at most) until all 8 have started: they pass only if
    // all 8 run at once.
    for (int i = 1; i <= 8; ++i) {
        const std::string label = "s" + std::to_string(i);
        need[label] = 1;
        cmds += "@slots=1,label=" + label + " touch " + dir.path() + "/$PTO_PAR_LABEL; i=0; "
                "while [ $(ls " + dir.path() + " | grep -c '^s') -lt 8 ]; do i=$((i+1)); "
                "[ $i -gt 200 ] && exit 1; sleep 0.05; done\n";
    }
    const auto file = dir.write("c.cmds", cmds);
    const auto r = run({pto_par(), "-d", "0-1", "--device-slots", "4", file});
    CHECK(r.exit_code == 0);
    const auto most = check_slots(r.err, 4, need);
    CHECK(most.at(0) == 4);
    CHECK(most.at(1) == 4);
}

TEST_CASE("slot jobs and whole-device jobs under a random mixed load never overlap")
{
    TempDir dir;
    std::mt19937 rng(20261201);
    std::string cmds;
    std::map<std::string, std::size_t> need;
    for (int i = 0; i < 60; ++i) {
        const std::string ms = std::to_string(rng() % 30);
        if (rng() % 3 == 0) {
            cmds += "@" + std::to_string(1 + rng() % 2) + ",label=w" + std::to_string(i) + " sleep 0.0" + ms + "\n";
        } else {
            const std::size_t s = 1 + rng() % 3;
            need["s" + std::to_string(i)] = s;
            cmds += "@slots=" + std::to_string(s) + ",label=s" + std::to_string(i) + " sleep 0.0" + ms + "\n";
        }
    }
    const auto file = dir.write("m.cmds", cmds);
    const auto r = run({pto_par(), "-d", "0-2", "--device-slots", "3", "-j", "8", file});
    CHECK(r.exit_code == 0);
    check_slots(r.err, 3, need);
}

TEST_CASE("a slot job sees its one device everywhere a job sees its devices")
{
    TempDir dir;
    const auto file = dir.write("one.cmds", "@slots=2 echo \"$PTO_PAR_DEVICES {devices} {ndevices} $CUDA_VISIBLE_DEVICES\"\n");
    const auto r = run({pto_par(), "-d", "3", "--device-slots", "2", "-e", "CUDA_VISIBLE_DEVICES", file});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "3 3 1 3\n");
}

TEST_CASE("-j auto counts slots, and the plan says how many a device has")
{
    TempDir dir;
    const auto file = dir.write("p.cmds", "@slots=1 true\n@2 true\n");
    const auto r = run({pto_par(), "-n", "-d", "0-1", "--device-slots", "4", file});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("4 slots per device, platform hw, -j 8,") != std::string::npos);
    CHECK(r.out.find("\t1 slot\t") != std::string::npos);
}

TEST_CASE("slots that cannot fit, or cannot be had, are errors before anything runs")
{
    TempDir dir;
    const auto file = dir.write("big.cmds", "true\n@slots=5,label=big true\n");
    auto r = run({pto_par(), "-d", "0-1", "--device-slots", "4", file});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(file + ":2:1: error: job 'big' needs 5 slots of one device but a device has 4 (--device-slots)") !=
          std::string::npos);
    r = run({pto_par(), "-d", "0-1", "--device-slots", "0", file});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("invalid value '0' for --device-slots: expected an integer from 1 to 1024") != std::string::npos);
    r = run({pto_par(), "--launcher", "slurm", "--device-slots", "2", file});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--device-slots does not go with --launcher slurm") != std::string::npos);
    const auto both = dir.write("both.cmds", "@2,slots=1 true\n");
    r = run({pto_par(), "-d", "0-1", "--device-slots", "4", both});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("slots=1 takes slots of one device; it cannot go with a device count") != std::string::npos);
}

}
