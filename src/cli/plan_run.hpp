// Which jobs of the file this run works through, and in which order.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <pto/error.hpp>

#include "cli/options.hpp"
#include "cmdfile/commands_file.hpp"

namespace pto::cli {

// The jobs this run works through, in its order: the file's, narrowed to a
// shard and to what failed last time, ordered by history.
struct Planned {
    std::vector<cmdfile::JobSpec> specs;
    std::vector<std::optional<double>> expected;  // per job of `specs`, from history
    std::string description;  // ", shard 2/4 (13 of 50 jobs)...", empty for the whole file as is
    // JSON Lines the --json report starts with: the last records of the jobs
    // --rerun-failed does not run again, when it names the same file.
    std::string kept_records;
};

// `all` is taken by value: the chosen jobs are moved out of it, so that a
// large file is held once, not twice.
Expected<Planned> plan_run(const Options& opt, std::vector<cmdfile::JobSpec> all);

}  // namespace pto::cli
