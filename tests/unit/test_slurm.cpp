#include <doctest/doctest.h>

#include <signal.h>

#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "agent/step_gpu_variables.hpp"
#include "runner/slurm_step.hpp"
#include "slurm/allocation.hpp"
#include "slurm/step_checks.hpp"

using namespace pto;

namespace {

// What `step` passes on of `stream` fed to it in two parts, cut at `cut`.
std::string fed_in_two(runner::StepState& step, std::string_view stream, std::size_t cut)
{
    std::string out(step.filter(stream.substr(0, cut)));
    out += step.filter(stream.substr(cut));
    out += step.take_pending();
    return out;
}

}  // namespace

TEST_SUITE("slurm_allocation")
{
    TEST_CASE("host lists expand with their zero padding")
    {
        auto names = slurm::expand_hostlist("n[1-3,7],gpu-a[08-10],solo");
        REQUIRE(names);
        CHECK(*names == std::vector<std::string>{"n1", "n2", "n3", "n7", "gpu-a08", "gpu-a09", "gpu-a10", "solo"});
        CHECK_FALSE(slurm::expand_hostlist("n[3-1]"));
        CHECK_FALSE(slurm::expand_hostlist("n[1-"));
        CHECK_FALSE(slurm::expand_hostlist("n[a]"));
    }

    TEST_CASE("the job's details give each node its GPU indices")
    {
        const char* text = "JobId=7 JobName=bash\n"
                           "   NodeList=n[1-3]\n"
                           "   NumNodes=3 NumCPUs=8 NumTasks=8 CPUs/Task=1 ReqB:S:C:T=0:0:*:*\n"
                           "     Nodes=n[1-2] CPU_IDs=0-3 Mem=0 GRES=gpu:2(IDX:0-1)\n"
                           "     Nodes=n3 CPU_IDs=0 Mem=0 GRES=gpu:a100:3(IDX:0,2-3),shard:1(IDX:N/A)\n";
        auto nodes = slurm::parse_job_details(text);
        REQUIRE(nodes);
        REQUIRE(nodes->size() == 3);
        CHECK((*nodes)[0].name == "n1");
        CHECK((*nodes)[1].name == "n2");
        CHECK((*nodes)[1].ids == std::vector<int>{0, 1});
        CHECK((*nodes)[2].name == "n3");
        CHECK((*nodes)[2].ids == std::vector<int>{0, 2, 3});
        CHECK((*nodes)[1].cpus == 4);
        CHECK((*nodes)[2].cpus == 1);
    }

    TEST_CASE("a node without GPUs has none; no node line is an error")
    {
        auto nodes = slurm::parse_job_details("     Nodes=c1 CPU_IDs=0 Mem=0 GRES=\n");
        REQUIRE(nodes);
        CHECK((*nodes)[0].ids.empty());
        CHECK_FALSE(slurm::parse_job_details("JobId=1\n   NodeList=n1\n"));
    }

    TEST_CASE("step headers")
    {
        auto h = slurm::parse_step_header("12.3 n2 0,1");
        REQUIRE(h);
        CHECK(h->step == "12.3");
        CHECK(h->node == "n2");
        CHECK(h->gpus == std::vector<int>{0, 1});
        auto none = slurm::parse_step_header("12.4 n1 ");
        REQUIRE(none);
        CHECK(none->gpus.empty());
        CHECK_FALSE(slurm::parse_step_header("12.3"));
        CHECK_FALSE(slurm::parse_step_header("12.3 n1 x"));
    }

    TEST_CASE("the header is taken out of the output, split anywhere")
    {
        const std::string stream = "srun: warning: something\n\x1epto-par-step 5.0 n1 1\nhello\nworld";
        for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
            runner::StepControl control{"scancel", nullptr, {}};
            runner::StepState step("n1", control);
            const std::string out = fed_in_two(step, stream, cut);
            CAPTURE(cut);
            CHECK(out == "srun: warning: something\nhello\nworld");
            REQUIRE(step.header());
            CHECK(step.header()->step == "5.0");
            CHECK(step.header()->gpus == std::vector<int>{1});
        }
    }

    TEST_CASE("after the header, Slurm's lines go to notices and the end frame says how the line ended")
    {
        const std::string stream = "\x1epto-par-step 5.0 n1 1\nhello\nsrun: error: n1: task 0: Exited\n"
                                   "\x1e" "bell sr\nslurmstepd-n1: error: *** STEP 5.0 ON n1 CANCELLED ***\n"
                                   "no newline\x1epto-par-end 139 2\n";
        for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
            std::vector<std::string> notices;
            runner::StepControl control{"scancel", nullptr,
                                        [&](const std::string& text) { notices.push_back(text); }};
            runner::StepState step("n1", control);
            const std::string out = fed_in_two(step, stream, cut);
            CAPTURE(cut);
            CHECK(out == "hello\n\x1e" "bell sr\nno newline");
            CHECK(notices == std::vector<std::string>{"n1: srun: error: n1: task 0: Exited",
                                                      "n1: slurmstepd-n1: error: *** STEP 5.0 ON n1 CANCELLED ***"});
            REQUIRE(step.ended());
            CHECK(step.wait_status(0) == 139);
        }
    }

    TEST_CASE("a line that is only the start of a frame marker is the job's, before and after the header")
    {
        // Every proper prefix of every marker, alone on its line.
        std::vector<std::string> lines;
        for (const std::string_view marker : {slurm::step_header_marker, slurm::step_end_marker,
                                              slurm::step_check_marker, slurm::step_hold_marker})
            for (std::size_t n = 1; n < marker.size(); ++n)
                lines.emplace_back(marker.substr(0, n));
        for (const auto& line : lines) {
            const std::string job = line + "\n";
            const std::string stream = job + "\x1epto-par-step 5.0 n1 1\n" + job + "tail";
            for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
                runner::StepControl control{"scancel", nullptr, {}};
                runner::StepState step("n1", control);
                CAPTURE(line);
                CAPTURE(cut);
                std::string out;
                CHECK_NOTHROW(out = fed_in_two(step, stream, cut));
                CHECK(out == job + job + "tail");
                CHECK(step.header());
                CHECK(step.take_verdicts().empty());
                CHECK_FALSE(step.holding());
            }
        }
    }

    TEST_CASE("without the end frame a step killed by a signal is that signal, after srun's 128+N")
    {
        runner::StepControl control{"scancel", nullptr, {}};
        runner::StepState step("n1", control);
        (void)step.filter("\x1epto-par-step 5.0 n1 1\n");
        CHECK_FALSE(step.ended());
        CHECK(step.wait_status(137 << 8) == SIGKILL);
        CHECK_FALSE(step.wait_status(3 << 8));
        CHECK(slurm::parse_step_end("0 0"));
        CHECK_FALSE(slurm::parse_step_end("0"));
        CHECK_FALSE(slurm::parse_step_end("0 -1"));
    }

    TEST_CASE("check frames carry a sick GPU's words and output whatever bytes they hold")
    {
        static constexpr char bytes[] = "bad \\ gpu\n\x1e\x7f\x01\0 end";  // a NUL among them
        const slurm::CheckVerdict sick{1, "its check exited 3", std::string(bytes, sizeof bytes - 1)};
        const std::string frame = slurm::format_check_frame(sick);
        REQUIRE(frame.starts_with(slurm::step_check_marker));
        CHECK(frame.find('\n') == frame.size() - 1);
        CHECK(frame.find('\x1e', 1) == std::string::npos);
        const std::size_t from = slurm::step_check_marker.size();
        auto back = slurm::parse_check_frame(std::string_view(frame).substr(from, frame.size() - 1 - from));
        REQUIRE(back);
        CHECK(back->gpu == 1);
        CHECK(back->why == sick.why);
        CHECK(back->output == sick.output);
        auto ok = slurm::parse_check_frame("0 ok");
        REQUIRE(ok);
        CHECK(ok->why.empty());
        CHECK_FALSE(slurm::parse_check_frame("x ok"));
        CHECK_FALSE(slurm::parse_check_frame("1 sick"));
        CHECK_FALSE(slurm::parse_check_frame("1 sick why out\\x4"));
        CHECK_FALSE(slurm::parse_check_frame("1 fine"));
    }

    TEST_CASE("verdicts before the header and a hold frame: the line never ran, split anywhere")
    {
        const std::string stream = std::string("srun: warning: x\n") + slurm::format_check_frame({0, "", ""}) +
                                   slurm::format_check_frame({1, "its check exited 1", "no such gpu\n"}) +
                                   "\x1epto-par-hold 5.0\n";
        for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
            runner::StepControl control{"scancel", nullptr, {}};
            runner::StepState step("n1", control);
            const std::string out = fed_in_two(step, stream, cut);
            const auto verdicts = step.take_verdicts();
            CAPTURE(cut);
            CHECK(out == "srun: warning: x\n");
            CHECK_FALSE(step.header());
            REQUIRE(verdicts.size() == 2);
            CHECK(verdicts[0].gpu == 0);
            CHECK(verdicts[0].why.empty());
            CHECK(verdicts[1].gpu == 1);
            CHECK(verdicts[1].output == "no such gpu\n");
            CHECK(step.holding());
            CHECK_FALSE(step.checked_after_line());
        }
    }

    TEST_CASE("verdicts after a failed line come before the end frame, after a partial line of the job's")
    {
        const std::string stream = std::string("\x1epto-par-step 5.0 n1 1\nno newline") +
                                   slurm::format_check_frame({1, "its check exited 1", ""}) +
                                   "\x1epto-par-end 768 0\n\x1epto-par-hold 5.0\n";
        for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
            runner::StepControl control{"scancel", nullptr, {}};
            runner::StepState step("n1", control);
            const std::string out = fed_in_two(step, stream, cut);
            CAPTURE(cut);
            CHECK(out == "no newline");
            const auto verdicts = step.take_verdicts();
            REQUIRE(verdicts.size() == 1);
            CHECK(verdicts[0].why == "its check exited 1");
            CHECK(step.ended());
            CHECK(step.wait_status(0) == 768);
            CHECK(step.holding());
            CHECK(step.checked_after_line());
        }
    }

    TEST_CASE("without a header (srun could not start the step) everything is output")
    {
        runner::StepControl control{"scancel", nullptr, {}};
        runner::StepState step("n1", control);
        std::string out(step.filter("srun: error: Unable to create step for job 5: Requested node configuration "
                                    "is not available\n"));
        out += step.take_pending();
        CHECK(out == "srun: error: Unable to create step for job 5: Requested node configuration is not available\n");
        CHECK_FALSE(step.header());
    }

    TEST_CASE("a step's srun line asks for the node and the count, or for no GPU at all")
    {
        SlurmOptions opt;
        const auto two = runner::step_argv(opt, "n2", 2, "pto-par.1.2", {"/bin/sh", "-c", "true"});
        CHECK(std::find(two.begin(), two.end(), "--gres=gpu:2") != two.end());
        CHECK(std::find(two.begin(), two.end(), "--exact") != two.end());
        const auto w = std::find(two.begin(), two.end(), "-w");
        REQUIRE(w != two.end());
        CHECK(*(w + 1) == "n2");
        const auto name = std::find(two.begin(), two.end(), "-J");
        REQUIRE(name != two.end());
        CHECK(*(name + 1) == "pto-par.1.2");
        CHECK(two.back() == "true");
        const auto none = runner::step_argv(opt, "n1", 0, "pto-par.1.3", {"true"});
        CHECK(std::find(none.begin(), none.end(), "--gres=none") != none.end());
    }
}

TEST_SUITE("slurm_allocation")
{
TEST_CASE("a check of one GPU of a step sees that GPU alone in each variable Slurm set for the step")
{
    const std::map<std::string, std::string> env{{"SLURM_STEP_GPUS", "2,3"},
                                                 {"CUDA_VISIBLE_DEVICES", "0,1"},
                                                 {"GPU_DEVICE_ORDINAL", "0,1"},
                                                 {"ROCR_VISIBLE_DEVICES", ",1"},
                                                 {"SLURM_GPUS_ON_NODE", "2"},
                                                 {"PATH", "/bin"}};
    const auto getenv_fn = [&](const char* name) -> const char* {
        const auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    };
    const pto::agent::StepGpuVariables vars({2, 3}, getenv_fn);
    using Set = std::vector<std::pair<std::string, std::string>>;
    const int three = 3;
    CHECK(vars.for_gpus(std::span<const int>(&three, 1)) ==
          Set{{"SLURM_STEP_GPUS", "3"}, {"CUDA_VISIBLE_DEVICES", "1"}, {"GPU_DEVICE_ORDINAL", "1"},
              {"ROCR_VISIBLE_DEVICES", "1"}, {"SLURM_GPUS_ON_NODE", "1"}});
    // The line: the step's own values.
    const std::vector<int> both{2, 3};
    CHECK(vars.for_gpus(both) == Set{{"SLURM_STEP_GPUS", "2,3"}, {"CUDA_VISIBLE_DEVICES", "0,1"},
                                     {"GPU_DEVICE_ORDINAL", "0,1"}, {"ROCR_VISIBLE_DEVICES", ",1"},
                                     {"SLURM_GPUS_ON_NODE", "2"}});
    // An empty first entry keeps its place.
    const int two = 2;
    CHECK(vars.for_gpus(std::span<const int>(&two, 1))[3] == std::pair<std::string, std::string>{"ROCR_VISIBLE_DEVICES", ""});
}

TEST_CASE("a GPU list that does not match the step's GPUs is left as Slurm set it")
{
    const auto getenv_fn = [](const char* name) -> const char* {
        return std::string(name) == "CUDA_VISIBLE_DEVICES" ? "GPU-a,GPU-b,GPU-c" : nullptr;
    };
    const pto::agent::StepGpuVariables vars({0, 1}, getenv_fn);
    const int one = 1;
    const int other = 7;
    using Set = std::vector<std::pair<std::string, std::string>>;
    CHECK(vars.for_gpus(std::span<const int>(&one, 1)) == Set{{"CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b,GPU-c"}});
    CHECK(vars.for_gpus(std::span<const int>(&other, 1)) == Set{{"CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b,GPU-c"}});
}
}
