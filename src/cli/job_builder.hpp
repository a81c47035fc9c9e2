// Jobs of the commands file -> jobs of the scheduler: the shell, the
// placeholders and the PTO_PAR_* environment a job sees.
#pragma once

#include <span>
#include <string>
#include <vector>

#include <pto/scheduler.hpp>

#include "cli/slurm.hpp"
#include "cmdfile/commands_file.hpp"
#include "devices/discovery.hpp"

namespace pto::cli {

struct JobWorld {
    std::string shell;                    // runs each line as SHELL -c LINE
    // The variables each job gets its devices in: the pool's own
    // (DiscoveredPool::narrowed) unless -e none, then the -e names.
    std::vector<std::string> device_env;
    const DiscoveredPool* pool;           // what -e hands out: ids, or a variable's own entries
    int retries = 0;                      // --retries, for lines without retries=
    std::string slurm_self;               // --launcher slurm: this binary, which each step runs (step mode)
    double kill_grace_s = 5;              // --kill-grace, which a step's agent gives what its line left
    // --lock-dir as given ("" when not): a run inside a job then leases
    // where this one does, and so finds its job's leases.
    std::string lock_dir;
    StepCheck step_check;  // --launcher slurm: --device-check, which each step's agent runs on its GPUs
};

// `specs` must outlive the returned jobs' build functions.
std::vector<Job> build_jobs(std::span<const cmdfile::JobSpec> specs, const JobWorld& world);

}  // namespace pto::cli
