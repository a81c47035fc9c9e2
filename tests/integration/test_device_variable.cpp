// The first promise by default: a job's device variable names its devices
// only, not the pool's, so that a CUDA or CANN program in it uses no other
// job's device.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "process.hpp"

using namespace pto::test;
using namespace std::chrono_literals;

namespace {

// Two jobs of one device each, both running at once, each printing what
// its CUDA program would see.
std::string two_jobs(const TempDir& dir)
{
    return dir.write("cv.cmds", "@1,label=a echo a=$CUDA_VISIBLE_DEVICES; sleep 0.3\n"
                                "@1,label=b echo b=$CUDA_VISIBLE_DEVICES; sleep 0.3\n");
}

std::vector<std::string> without_device_variables(std::vector<std::string> argv)
{
    std::vector<std::string> env{"/usr/bin/env"};
    for (const char* v : {"PTO_PAR_DEVICES", "PTO_PAR_DEVICE_NAMES", "PTO_PAR_DEVICE_VARIABLE", "PTO_PAR_SEQ",
                          "ASCEND_RT_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"})
        env.insert(env.end(), {"-u", v});
    argv.insert(argv.begin(), env.begin(), env.end());
    return argv;
}

}  // namespace

TEST_SUITE("scheduling") {

TEST_CASE("a pool from $CUDA_VISIBLE_DEVICES: each job's $CUDA_VISIBLE_DEVICES is its own device, without -e")
{
    TempDir dir;
    const auto r = run(without_device_variables({"CUDA_VISIBLE_DEVICES=4,5", pto_par(), "-j", "2", "--lock-dir",
                                                 "none", two_jobs(dir)}));
    INFO(r.err);
    CHECK(r.exit_code == 0);
    const bool one_each = (r.out.find("a=4\n") != std::string::npos && r.out.find("b=5\n") != std::string::npos) ||
                          (r.out.find("a=5\n") != std::string::npos && r.out.find("b=4\n") != std::string::npos);
    CHECK_MESSAGE(one_each, r.out);
    // Named devices the same: each job its own UUID.
    const auto u = run(without_device_variables({"CUDA_VISIBLE_DEVICES=GPU-aaa,GPU-bbb", pto_par(), "-j", "2",
                                                 "--lock-dir", "none", two_jobs(dir)}));
    CHECK(u.exit_code == 0);
    CHECK_MESSAGE(u.out.find("=GPU-aaa\n") != std::string::npos, u.out);
    CHECK_MESSAGE(u.out.find("=GPU-bbb\n") != std::string::npos, u.out);
    CHECK(u.out.find("GPU-aaa,GPU-bbb") == std::string::npos);
}

TEST_CASE("-e none leaves the device variable as the run was given it")
{
    TempDir dir;
    const auto r = run(without_device_variables({"ASCEND_RT_VISIBLE_DEVICES=0,1", pto_par(), "-j", "2", "-e",
                                                 "none", "--lock-dir", "none",
                                                 dir.write("asc.cmds", "@1 echo x=$ASCEND_RT_VISIBLE_DEVICES\n"
                                                                       "@1 echo x=$ASCEND_RT_VISIBLE_DEVICES\n")}));
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(lines_with(r.out, "x=0,1").size() == 2);
}

TEST_CASE("-d with no {devices} and no -e: said once at start that jobs learn their devices from $PTO_PAR_DEVICES")
{
    TempDir dir;
    const std::string said = "learn their devices only from $PTO_PAR_DEVICES";
    const auto r = run(without_device_variables({pto_par(), "-d", "0-1", "--lock-dir", "none",
                                                 dir.write("a.cmds", "@1 true\n@1 true\n")}));
    CHECK(r.exit_code == 0);
    CHECK_MESSAGE(lines_with(r.err, said).size() == 1, r.err);
    // Not when a line uses {devices}, when -e is given, or with no device to learn.
    const auto placeholder = run(without_device_variables(
        {pto_par(), "-d", "0-1", "--lock-dir", "none", dir.write("b.cmds", "@1 echo {devices}\n@1 true\n")}));
    CHECK_MESSAGE(placeholder.err.find(said) == std::string::npos, placeholder.err);
    const auto e = run(without_device_variables({pto_par(), "-d", "0-1", "-e", "MY_DEVICES", "--lock-dir", "none",
                                                 dir.write("c.cmds", "@1 true\n")}));
    CHECK_MESSAGE(e.err.find(said) == std::string::npos, e.err);
    const auto none = run(without_device_variables({pto_par(), "-d", "0-1", "--lock-dir", "none",
                                                    dir.write("d.cmds", "@0 true\n")}));
    CHECK_MESSAGE(none.err.find(said) == std::string::npos, none.err);
}

}
