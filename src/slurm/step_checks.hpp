// The step agent's word on the health checks of its GPUs (SPEC 15 under
// --launcher slurm): frames in the step's output beside the header and the
// end frame, each one line, so that the run can tell them from the job's
// bytes. Before the header: the checks before the line; before the end
// frame: those after the line failed. A hold frame, last, says the step
// keeps its GPUs (one of them is sick) until it gets SIGTERM.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <pto/error.hpp>

namespace pto::slurm {

// In a step's environment: the GPUs of its node the run trusts (checked,
// and no job failed or timed out on them since), which the agent does not
// check before the line; taken out before anything runs.
inline constexpr const char* trusted_gpus_variable = "PTO_PAR_TRUSTED_GPUS";

inline constexpr std::string_view step_check_marker = "\x1epto-par-check ";
inline constexpr std::string_view step_hold_marker = "\x1epto-par-hold ";

// What of a sick GPU's check output a frame carries: its last bytes.
inline constexpr std::size_t check_output_kept = 2048;
// The longest frame: a check frame with all of that escaped, and its words.
inline constexpr std::size_t longest_frame = 4 * check_output_kept + 4096;

struct CheckVerdict {
    int gpu = 0;
    std::string why;     // empty: healthy; else how its check failed ("its check exited 1")
    std::string output;  // what a failed check printed, at most check_output_kept bytes
};

// The whole frame, newline included: "ID ok", or "ID sick WHY OUTPUT" with
// WHY and OUTPUT escaped (bytes up to space, backslash and DEL as \xHH).
std::string format_check_frame(const CheckVerdict& v);
// One check frame without its marker and newline.
Expected<CheckVerdict> parse_check_frame(std::string_view line);

}  // namespace pto::slurm
