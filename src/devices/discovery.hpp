// Where `-d auto` finds the pool (SPEC 8): the first of these that is set or
// found wins, in order: $PTO_PAR_DEVICES, $ASCEND_RT_VISIBLE_DEVICES,
// $CUDA_VISIBLE_DEVICES, $SLURM_STEP_GPUS, $SLURM_JOB_GPUS, /dev/davinciN,
// /dev/nvidiaN. Inside a job of a run whose pool came from device names,
// $PTO_PAR_DEVICE_NAMES and $PTO_PAR_DEVICE_VARIABLE refine $PTO_PAR_DEVICES
// (SPEC 10, nested runs).
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <pto/error.hpp>

namespace pto {

// Set for every job, with PTO_PAR_DEVICES: the job's devices by the names
// the pool came from (GPU UUIDs...) and the variable that named them, both
// empty when the ids are the devices' own numbers. Always set, so that a
// value inherited from a run further out never describes this run's ids.
inline constexpr const char* device_names_variable = "PTO_PAR_DEVICE_NAMES";
inline constexpr const char* device_variable_variable = "PTO_PAR_DEVICE_VARIABLE";

struct DiscoveredPool {
    std::vector<int> ids;
    // In words, for -v, --dry-run and hints: "$CUDA_VISIBLE_DEVICES",
    // "$CUDA_VISIBLE_DEVICES (GPU UUIDs, as positions 0-1)", "/dev/davinci*",
    // "nothing found: no devices".
    std::string source;
    // The environment variable the pool came from ("CUDA_VISIBLE_DEVICES"),
    // empty when it came from /dev or from nothing.
    std::string variable;
    // When that variable named devices rather than numbering them (GPU
    // UUIDs, MIG ids), its entries in order; ids are then their positions
    // 0..n-1. Empty when the ids are the variable's own numbers.
    std::vector<std::string> entries;
    // The variable each job gets narrowed to its own devices unless -e none
    // (SPEC 8: no two running jobs on one device holds for a CUDA or CANN
    // program only if it sees its job's devices alone): the one the pool
    // came from, or the platform's for /dev/davinciN and /dev/nvidiaN.
    // Empty when nothing says which (-d, $PTO_PAR_DEVICES alone, no pool).
    std::string narrowed{};
    // Its entries parallel to ids when they are not the ids' numbers: for
    // /dev nodes their positions, as the runtime numbers the devices it is
    // shown (a container given /dev/nvidia2 and /dev/nvidia3 calls them 0
    // and 1); inside a job, the entries the outer run narrowed it to.
    std::vector<std::string> narrowed_entries{};
    // NAME=VALUE also set in each job that gets `narrowed`: CUDA numbers
    // GPUs fastest first unless told the order of their device files.
    std::vector<std::string> also_set{};

    // The text to put in environment variable `var` for a job holding `ids`:
    // the original entries at those positions when `var` is the variable
    // that named the devices (the runtime reading it wants UUIDs back, not
    // our positions), `narrowed_entries` when it is `narrowed`, else the ids
    // comma-separated.
    std::string value_for(std::string_view var, std::span<const int> job_ids) const;
};

// Reads a variable; nullptr when it is not set.
using GetenvFn = std::function<const char*(const char*)>;

// `getenv_fn` and `dev_root` are parameters so that tests need neither the
// process environment nor real devices; the CLI passes std::getenv and "/dev".
// A variable that is set decides, even when it says "no devices" (empty, "-1"
// or "NoDevFiles", as CUDA reads them): it is how a scheduler or a parent
// pto-par hides devices. A malformed value is an error naming the variable.
Expected<DiscoveredPool> discover_devices(const GetenvFn& getenv_fn, const std::string& dev_root = "/dev");

}  // namespace pto
