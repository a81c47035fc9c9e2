#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>

#include <pto/error.hpp>

#include "cli/early_signals.hpp"
#include "cmdfile/commands_file.hpp"
#include "common/unique_fd.hpp"

namespace pto::cli {

// The commands file, open: "-" is standard input.
struct InputFile {
    UniqueFd owned;  // empty for standard input
    int fd = -1;
    std::string name;  // for messages: "standard input", "'tests.cmds'"
    // When it is a regular file (named or on standard input): its device
    // and inode, so that no report is written over it.
    std::optional<std::pair<dev_t, ino_t>> identity;
};

Expected<InputFile> open_input(const std::string& file);

struct Input {
    std::string text;                        // as far as it was read
    std::optional<cmdfile::Diagnostic> bad;  // reading stopped at this problem
    int stop_signal = 0;                     // reading stopped by this signal
};

// Reads in one poll with the signals, so that a slow pipe or a terminal
// never keeps them waiting: SIGUSR1 prints how far the reading got on
// standard error, a stop signal ends it. Checked as it is read
// (cmdfile::InputCheck).
Expected<Input> read_input(const InputFile& in, EarlySignals& signals);

}  // namespace pto::cli
