// What a Slurm allocation holds, from `scontrol show job -d`: its nodes and
// each node's GPU indices. Pure: the text in, values out.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <pto/error.hpp>

namespace pto::slurm {

struct NodeDevices {
    std::string name;      // as Slurm names it (SLURMD_NODENAME), never a host name
    std::vector<int> ids;  // the GPU indices the allocation holds on it, ascending
    std::size_t cpus = 0;  // how many CPUs it holds there (CPU_IDs)
};

// "n[1-3,7],gpu-a[01-02]" -> n1 n2 n3 n7 gpu-a01 gpu-a02 (zero padding kept).
Expected<std::vector<std::string>> expand_hostlist(std::string_view list);

// The per-node lines of `scontrol show job -d ID`:
//     Nodes=n[1-2] CPU_IDs=0-3 Mem=0 GRES=gpu:2(IDX:0-1)
// in the order Slurm lists them; a node without GPUs has no ids.
Expected<std::vector<NodeDevices>> parse_job_details(std::string_view text);

// The step header: the first line a step writes, before the job's own
// output, telling where it runs and which GPUs Slurm gave it. It starts with
// a control character no job output is expected to begin with.
inline constexpr std::string_view step_header_marker = "\x1epto-par-step ";

struct StepHeader {
    std::string step;       // "JOB.STEP", for scancel
    std::string node;       // SLURMD_NODENAME
    std::vector<int> gpus;  // SLURM_STEP_GPUS
};

// One header line without its marker and newline: "12.3 n1 0,1".
Expected<StepHeader> parse_step_header(std::string_view line);

// The step's last frame, from the agent once nothing of the job is left:
// the line's wait status and how many processes it left behind. It may
// follow a partial line of the job's output.
inline constexpr std::string_view step_end_marker = "\x1epto-par-end ";

struct StepEnd {
    int wait_status = 0;
    int leftovers = 0;
};

// "256 0" (without marker and newline).
Expected<StepEnd> parse_step_end(std::string_view line);

}  // namespace pto::slurm
