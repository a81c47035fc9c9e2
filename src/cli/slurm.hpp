// --launcher slurm on the command line's side: the allocation's nodes and
// GPUs, and the other end of each step (`pto-par --slurm-step`), which runs
// on the node once Slurm has picked the GPUs and gives the job what a local
// run would: PTO_PAR_DEVICES, the -e variables and the placeholders, all
// with those ids.
#pragma once

#include <string>
#include <vector>

#include <pto/error.hpp>
#include <pto/scheduler.hpp>

#include "cli/options.hpp"
#include "slurm/allocation.hpp"

namespace pto::cli {

inline constexpr const char* step_mode_flag = "--slurm-step";
// Its health checks (--device-check): `--check TIMEOUT_MS CHECK` right
// after step_mode_flag, and the GPUs the run trusts in
// slurm::trusted_gpus_variable.
inline constexpr const char* step_check_flag = "--check";

// The nodes of $SLURM_JOB_ID with their GPUs, from `scontrol show job -d`;
// outside an allocation an error that says how to get one.
Expected<std::vector<slurm::NodeDevices>> read_allocation(const char* job_id);

// What to say outside an allocation: the salloc line that would work.
std::string salloc_hint(int argc, char** argv);

// Takes the allocation's own GPU request (--gpus, --gpus-per-node, ...) out
// of the environment that srun and the steps inherit.
void forget_allocation_gpu_requests();

// --device-check for the steps: its command (empty: none) and timeout.
struct StepCheck {
    std::string command;
    double timeout_s = 60;
};

// The argv that makes a step run `command` with `shell` as pto-par would:
// this very binary in step mode, giving what the line leaves `kill_grace_s`,
// checking the step's GPUs by `check`.
std::vector<std::string> step_command(const std::string& self, double kill_grace_s, const std::string& shell,
                                      const std::string& command, const std::vector<std::string>& device_env,
                                      const StepCheck& check);

// Step mode: argv is [pto-par, --slurm-step, GRACE_MS, SHELL, COMMAND, NAME...],
// or with health checks [pto-par, --slurm-step, --check, TIMEOUT_MS, CHECK,
// GRACE_MS, SHELL, COMMAND, NAME...] (and trusted_gpus_variable set).
// Runs SHELL -c COMMAND under the step agent (agent/step_agent.hpp) with
// the job's variables; returns the exit status (126, as a shell that cannot
// run a command, when it cannot even start).
int run_step(int argc, char** argv);

// --launcher slurm: the allocation's nodes as the pool, checked against
// the jobs per node; an error message when that cannot be.
struct SlurmSetup {
    SlurmOptions options;
    std::vector<slurm::NodeDevices> nodes;
    std::string job_id;
    std::string self;  // this binary, run by each step
    std::size_t devices = 0;
};

Expected<SlurmSetup> slurm_setup(const Options& opt, int argc, char** argv);

// "n1:0-1, n2:none"
std::string describe_nodes(const std::vector<slurm::NodeDevices>& nodes);

}  // namespace pto::cli
