#pragma once

#include <span>
#include <string>

#include "cmdfile/commands_file.hpp"

namespace pto::cli {

// --dry-run's plan: a '#' header saying where the pool came from, then one
// tab-separated line per job: seq, label, devices, timeout, line, command
// (placeholders left as written, since no devices are allocated).
std::string format_plan(std::span<const cmdfile::JobSpec> specs, const std::string& header);

}  // namespace pto::cli
