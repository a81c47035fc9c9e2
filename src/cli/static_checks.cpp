#include "cli/static_checks.hpp"

#include <algorithm>
#include <iostream>

#include <pto/devices.hpp>

#include "cli/slurm.hpp"

namespace pto::cli {

bool report_oversized(const std::string& file, const std::vector<cmdfile::JobSpec>& specs,
                      const DiscoveredPool& pool, bool discovered)
{
    bool any = false;
    const std::string pool_text =
        pool.ids.empty() ? "no devices" : std::to_string(pool.ids.size()) + " (" + format_device_range(pool.ids) + ")";
    for (const auto& s : specs) {
        if (static_cast<std::size_t>(s.devices) <= pool.ids.size())
            continue;
        any = true;
        std::cerr << cmdfile::format_diagnostic(
                         file, {s.line, 1,
                                "job '" + s.label + "' needs " + std::to_string(s.devices) + " device" +
                                    (s.devices == 1 ? "" : "s") + " but the pool has " + pool_text})
                  << "\n";
    }
    if (any)
        std::cerr << "pto-par: note: the pool came from " << pool.source
                  << (discovered ? "; pass the devices to use with -d, e.g. -d 0-3"
                                      : "; widen -d or lower the job's @N")
                  << "\n";
    return any;
}

bool report_oversized_per_node(const std::string& file, const std::vector<cmdfile::JobSpec>& specs,
                               const std::vector<slurm::NodeDevices>& nodes)
{
    std::size_t most = 0;
    for (const auto& n : nodes)
        most = std::max(most, n.ids.size());
    bool any = false;
    for (const auto& s : specs) {
        if (static_cast<std::size_t>(s.devices) <= most)
            continue;
        any = true;
        std::cerr << cmdfile::format_diagnostic(file, {s.line, 1,
                                                       "job '" + s.label + "' needs " + std::to_string(s.devices) +
                                                           " devices but no node of the allocation has more than " +
                                                           std::to_string(most) + " (" + describe_nodes(nodes) +
                                                           ")"})
                  << "\n";
    }
    if (any)
        std::cerr << "pto-par: note: a job runs on one node; ask salloc/sbatch for more GPUs per node (--gres=gpu:N)\n";
    return any;
}

bool report_slots(const std::string& file, const std::vector<cmdfile::JobSpec>& specs, bool slurm,
                  std::size_t device_slots)
{
    bool any = false;
    for (const auto& s : specs) {
        if (s.slots == 0 || (!slurm && static_cast<std::size_t>(s.slots) <= device_slots))
            continue;
        any = true;
        const std::string why =
            slurm ? "--launcher slurm does not share a GPU between steps (that needs Slurm's --gres=shard)"
                  : "a device has " + std::to_string(device_slots) + " (--device-slots)";
        std::cerr << cmdfile::format_diagnostic(file, {s.line, 1,
                                                       "job '" + s.label + "' needs " + std::to_string(s.slots) +
                                                           " slots of one device but " + why})
                  << "\n";
    }
    return any;
}

bool report_ports(const std::string& file, const std::vector<cmdfile::JobSpec>& specs, int port_low, int port_high)
{
    bool any = false;
    const int range = port_high - port_low + 1;
    for (const auto& s : specs)
        if (s.ports > range) {
            any = true;
            std::cerr << cmdfile::format_diagnostic(file, {s.line, 1,
                                                           "job '" + s.label + "' needs " + std::to_string(s.ports) +
                                                               " ports but --ports " + std::to_string(port_low) + "-" +
                                                               std::to_string(port_high) + " has " +
                                                               std::to_string(range)})
                      << "\n";
        }
    return any;
}

}  // namespace pto::cli
