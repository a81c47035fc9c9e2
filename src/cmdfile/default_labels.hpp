// Labels for the jobs of a commands file that have none.
#pragma once

#include <vector>

#include "cmdfile/commands_file.hpp"

namespace pto::cmdfile {

// A job without label=... is named after what it runs, so that status lines
// and reports read "test_add.py", not "job 17":
//  1. split the command on whitespace (naively: no shell quoting) and strip
//     quotes and shell punctuation ("'();&|<>`) from each word's ends;
//  2. skip leading VAR=value assignments (a command of nothing else is
//     "job");
//  3. pick the first argument after the program that looks like a file
//     (contains '/', or a '.' followed by a letter: "tests/test_add.py",
//     "lint.sh"), ignoring options ("-m", "--out=dir/x"); failing that, the
//     program itself ("./run.sh", "sleep");
//  4. take its basename (trailing slashes ignored), replace every byte
//     outside [A-Za-z0-9._+-] by '_', keep at most 48 bytes; "job" if empty;
//  5. if an explicit label anywhere in the file or an earlier default has
//     that name, append "-<seq>" until it is unique ("sleep", "sleep-2").
void assign_default_labels(std::vector<JobSpec>& jobs);

}  // namespace pto::cmdfile
