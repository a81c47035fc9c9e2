// Skipping the shell: most lines of a commands file are one plain command
// (`pytest tests/test_add.py --device 0-1`), for which `/bin/sh -c LINE` does
// nothing but split LINE at blanks, look the first word up in $PATH and
// execve it. Doing that ourselves saves starting a shell per job, which is
// most of what a short job costs.
//
// Only when the result is the same as the shell's: the decision here is
// purely lexical and conservative (anything the shell could expand, redirect,
// assign, group, or run as a builtin or keyword means "use the shell"), and
// the launcher adds the rest (the shell is dash, the program is found in
// PATH, an execve failure falls back to the shell in the child so that its
// error messages and exit codes stay the shell's).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pto::runner {

// The words dash would pass to execve for `sh -c LINE`, if LINE is one simple
// command made of literal words only; nullopt if the shell must run it.
// Accepted: words of [A-Za-z0-9] and `_-./,:+@%` separated by spaces and tabs,
// `=` outside the first word; the first word not a dash builtin or reserved
// word (except `true` and `false` alone, whose programs behave the same).
std::optional<std::vector<std::string>> plain_command_words(std::string_view line);

// True if `name` is a valid shell variable name (dash drops other
// environment entries before running a command).
bool is_shell_name(std::string_view name);

// True if /bin/sh is dash, the shell whose behaviour the direct path copies.
bool sh_is_dash();

}  // namespace pto::runner
