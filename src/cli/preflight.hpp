// Checks made before anything is created or started: a mistake on the
// command line must cost neither a job nor a file.
#pragma once

#include <sys/types.h>

#include <optional>
#include <span>
#include <string>
#include <utility>

#include <pto/error.hpp>

#include "cli/options.hpp"

namespace pto::cli {

// --shell names an executable file (a name without '/' is looked up in
// $PATH, as the launcher does), so that a typo is one usage error instead
// of every job failing with "No such file or directory".
Expected<void> check_shell(const std::string& shell);

// --json, --junit and --log-dir may not name the commands file (`input`:
// its device and inode, when it is a regular file) or each other, nor an
// existing non-empty file that does not look like a report of their kind,
// which is the trace of `--json tests.cmds`: the file name forgotten, the
// commands file taken as the report's.
Expected<void> check_reports(const Options& opt, const std::optional<std::pair<dev_t, ino_t>>& input);

// Each --log-dir file (`names` in DIR) is none of the commands file, the
// --json and --junit reports and the --history files: by path made
// absolute (symlinks resolved) and by inode where it exists. A --junit
// report is not a --history file either (a --json one may be: it is
// rewritten on purpose).
Expected<void> check_distinct_outputs(const Options& opt, const std::optional<std::pair<dev_t, ino_t>>& input,
                                      std::span<const std::string> names);

}  // namespace pto::cli
