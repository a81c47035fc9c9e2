#include "agent/step_gpu_variables.hpp"

#include <algorithm>

namespace pto::agent {
namespace {

// Slurm's per-GPU lists for a step (gres/gpu: CUDA, ROCm, the generic
// ordinal and its own), each an entry per GPU in SLURM_STEP_GPUS' order.
constexpr const char* lists[] = {"SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
                                 "ROCR_VISIBLE_DEVICES"};
// How many GPUs the step has on its node.
constexpr const char* count = "SLURM_GPUS_ON_NODE";

std::vector<std::string> split(const std::string& list)
{
    std::vector<std::string> parts;
    for (std::size_t from = 0;;) {
        const auto comma = list.find(',', from);
        parts.push_back(list.substr(from, comma - from));
        if (comma == std::string::npos)
            return parts;
        from = comma + 1;
    }
}

}  // namespace

StepGpuVariables::StepGpuVariables(std::vector<int> gpus, const std::function<const char*(const char*)>& getenv_fn)
    : gpus_(std::move(gpus))
{
    for (const char* name : lists)
        if (const char* v = getenv_fn(name); v != nullptr)
            set_.emplace_back(name, v);
    if (const char* v = getenv_fn(count); v != nullptr)
        set_.emplace_back(count, v);
}

std::vector<std::pair<std::string, std::string>> StepGpuVariables::for_gpus(std::span<const int> ids) const
{
    std::vector<std::size_t> places;
    for (const int id : ids) {
        const auto at = std::find(gpus_.begin(), gpus_.end(), id);
        if (at == gpus_.end())
            return set_;
        places.push_back(static_cast<std::size_t>(at - gpus_.begin()));
    }
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [name, value] : set_) {
        if (name == count) {
            out.emplace_back(name, std::to_string(ids.size()));
            continue;
        }
        const auto parts = split(value);
        if (parts.size() != gpus_.size()) {
            out.emplace_back(name, value);
            continue;
        }
        std::string narrowed;
        for (std::size_t i = 0; i < places.size(); ++i)
            narrowed += (i == 0 ? "" : ",") + parts[places[i]];
        out.emplace_back(name, narrowed);
    }
    return out;
}

}  // namespace pto::agent
