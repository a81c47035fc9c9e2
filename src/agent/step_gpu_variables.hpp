// The variables Slurm sets for a step's GPUs (CUDA_VISIBLE_DEVICES and its
// kin), narrowed to some of them: the check of one GPU of an @2 step sees
// that GPU alone in each, as a local check does, not the whole step's.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace pto::agent {

class StepGpuVariables {
public:
    // As Slurm set them for the step's `gpus` (SLURM_STEP_GPUS' numbers, in
    // its order); `getenv_fn` reads the environment.
    StepGpuVariables(std::vector<int> gpus, const std::function<const char*(const char*)>& getenv_fn);

    // Each variable the step has, set for `ids` (some of the step's GPUs):
    // the entries at their places in the step's list, and the count of
    // SLURM_GPUS_ON_NODE. A list whose length is not the step's GPU count
    // cannot be narrowed and keeps its value; so does any variable for a
    // GPU that is not the step's.
    std::vector<std::pair<std::string, std::string>> for_gpus(std::span<const int> ids) const;

private:
    std::vector<int> gpus_;
    std::vector<std::pair<std::string, std::string>> set_;  // name, the step's value
};

}  // namespace pto::agent
