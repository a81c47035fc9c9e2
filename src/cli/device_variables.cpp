#include "cli/device_variables.hpp"

#include <algorithm>

namespace pto::cli {

std::vector<std::string> device_variables(const Options& opt, const DiscoveredPool& pool, bool slurm)
{
    std::vector<std::string> names;
    if (!slurm && !opt.device_env_none && !pool.narrowed.empty())
        names.push_back(pool.narrowed);
    for (const auto& name : opt.device_env)
        if (std::find(names.begin(), names.end(), name) == names.end())
            names.push_back(name);
    return names;
}

std::optional<std::string> devices_only_in_env_notice(const Options& opt, std::span<const cmdfile::JobSpec> specs,
                                                      const DiscoveredPool& pool, bool slurm)
{
    if (slurm || opt.devices == "auto" || pool.ids.empty() || !opt.device_env.empty() || opt.device_env_none)
        return std::nullopt;
    const auto says_devices = [](const cmdfile::JobSpec& s) {
        return s.command.find("{devices}") != std::string::npos || s.command.find("{device_list}") != std::string::npos;
    };
    const auto needs_devices = [](const cmdfile::JobSpec& s) { return s.devices > 0 || s.slots > 0; };
    if (std::any_of(specs.begin(), specs.end(), says_devices) ||
        std::none_of(specs.begin(), specs.end(), needs_devices))
        return std::nullopt;
    return "jobs learn their devices only from $PTO_PAR_DEVICES: no line uses {devices} and no -e names a "
           "variable, so a CUDA or CANN program in a job sees every device it would see without pto-par (give "
           "-e CUDA_VISIBLE_DEVICES or -e ASCEND_RT_VISIBLE_DEVICES)";
}

}  // namespace pto::cli
