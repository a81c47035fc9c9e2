// The checks of the jobs against what the run has, before anything starts:
// each job that can never fit is an error, compiler-style, on standard
// error; each returns true if there was one.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cmdfile/commands_file.hpp"
#include "devices/discovery.hpp"
#include "slurm/allocation.hpp"

namespace pto::cli {

// More devices than the pool has; `discovered`: the pool was found, not given with -d.
bool report_oversized(const std::string& file, const std::vector<cmdfile::JobSpec>& specs,
                      const DiscoveredPool& pool, bool discovered);

// More devices than any node of the allocation has: a job never spans nodes.
bool report_oversized_per_node(const std::string& file, const std::vector<cmdfile::JobSpec>& specs,
                               const std::vector<slurm::NodeDevices>& nodes);

// slots=S past --device-slots, or any slots= under Slurm.
bool report_slots(const std::string& file, const std::vector<cmdfile::JobSpec>& specs, bool slurm,
                  std::size_t device_slots);

// More ports than --ports LOW-HIGH has.
bool report_ports(const std::string& file, const std::vector<cmdfile::JobSpec>& specs, int port_low, int port_high);

}  // namespace pto::cli
