// The command the summary offers to run what did not pass again.
#pragma once

#include <string>

namespace pto::cli {

// This command reading the report it writes, `json`, with --rerun-failed.
// Its own --rerun-failed (also abbreviated, or with its value after '=') is
// left out; `argv` is in the order getopt left it, options first.
std::string rerun_command(int argc, char** argv, const std::string& json);

}  // namespace pto::cli
