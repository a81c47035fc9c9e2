// Which variables hand each job its devices (SPEC 8): the pool's own,
// narrowed to the job's devices as -e does, so that by default a CUDA or
// CANN program in a job sees no other job's device.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cli/options.hpp"
#include "cmdfile/commands_file.hpp"
#include "devices/discovery.hpp"

namespace pto::cli {

// The pool's narrowed variable first (unless -e none, or under Slurm,
// which sets the steps' own), then the -e names not already in.
std::vector<std::string> device_variables(const Options& opt, const DiscoveredPool& pool, bool slurm);

// What the run says at start when nothing but $PTO_PAR_DEVICES can tell a
// job its devices: a pool of -d, no -e, and no line with {devices} or
// {device_list}, though some line needs devices. Nothing otherwise.
std::optional<std::string> devices_only_in_env_notice(const Options& opt, std::span<const cmdfile::JobSpec> specs,
                                                      const DiscoveredPool& pool, bool slurm);

}  // namespace pto::cli
