#pragma once

#include <optional>
#include <ostream>
#include <span>
#include <string>

#include <pto/scheduler.hpp>

#include "cmdfile/commands_file.hpp"
#include "devices/discovery.hpp"
#include "slurm/allocation.hpp"

namespace pto::cli {

// --dry-run's plan: a '#' header saying where the pool came from, then one
// tab-separated line per job in run order: seq, label, devices, timeout,
// expected duration (from history, '-' without), line, command
// (placeholders left as written, since no devices are allocated).
// Written to `out` as it is formatted: a 100,000-line plan never sits in
// memory twice.
void print_plan(std::ostream& out, std::span<const cmdfile::JobSpec> specs,
                std::span<const std::optional<double>> expected, const std::string& header);

// --launcher slurm: '#' lines with each node's GPUs, then for each job the
// nodes it can run on (a job never spans nodes; which of them it gets
// depends on what is free when its turn comes).
void print_slurm_plan(std::ostream& out, std::span<const cmdfile::JobSpec> specs,
                      std::span<const slurm::NodeDevices> nodes);

// The plan's '#' line on the devices of `pool` and the ports of LOW-HIGH
// (when a job asks for ports) that another run leases in `lock_dir` now,
// each with its pid: jobs here would wait for them. Empty when none is.
std::string held_leases_text(const std::string& lock_dir, const DiscoveredPool& pool, std::span<const Job> jobs,
                             int port_low, int port_high);

}  // namespace pto::cli
