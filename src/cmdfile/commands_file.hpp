// The commands file (pto-par.cmds(5)): text in, one JobSpec per job out.
// Pure: no processes, no I/O beyond what the caller hands in.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pto::cmdfile {

struct JobSpec {
    std::size_t seq = 0;        // 1-based position among the jobs of the file
    std::size_t line = 0;       // 1-based line where the job starts
    std::string label;          // explicit, or a readable default unique in the file
    bool label_given = false;   // true when the file said label=...
    int devices = 1;            // whole devices the job needs (1 with slots)
    int slots = 0;              // slots=S: S slots of one device instead of whole devices
    std::optional<double> timeout_s;  // timeout=..., seconds
    int ports = 0;                    // ports=N: consecutive TCP ports it needs
    std::optional<int> retries;       // retries=N: runs again after a failure, up to N times
    std::string command;        // what follows the directive, placeholders unexpanded
};

struct Diagnostic {
    std::size_t line = 0;  // 1-based
    std::size_t col = 0;   // 1-based, in bytes
    std::string message;
};

// The kernel's limit for one argument string (MAX_ARG_STRLEN), NUL included.
inline constexpr std::size_t max_command_bytes = 128 * 1024;

// The longest physical line read: room for the longest command plus as
// much again for blanks and a directive. A longer line can only be a
// mistake (a binary file, an endless stream), found before it fills memory.
inline constexpr std::size_t max_line_bytes = 2 * max_command_bytes;

// A suite, not a stream: past these the file is refused as it is read
// (exit 2), so that memory stays flat whatever is piped in. A million jobs
// in 128 MiB is beyond any suite seen.
inline constexpr std::size_t max_file_lines = 1'000'000;
inline constexpr std::size_t max_file_bytes = 128u << 20;

// Checks a commands file as it is read, before anything is parsed: a NUL
// byte (not a text file) or a physical line longer than max_line_bytes is
// the one error of the file, found at once, so that reading `/dev/zero` or
// an endless line costs neither time nor memory.
class InputCheck {
public:
    // The next bytes of the file; the problem they end with, if any. Once
    // one is returned the rest of the file does not matter.
    std::optional<Diagnostic> feed(std::string_view bytes);
    // Line breaks seen so far.
    std::size_t line_breaks() const { return line_ - 1; }

private:
    std::size_t line_ = 1;
    std::size_t line_bytes_ = 0;  // of line_ so far, without its '\n'
    std::size_t bytes_ = 0;       // of the file so far
};

// Parses the whole text; `name` is only used in diagnostics. Either every job
// or every error (in file order), never both. Runs InputCheck first.
struct ParseResult {
    std::vector<JobSpec> jobs;
    std::vector<Diagnostic> errors;
};
ParseResult parse_commands(std::string_view text);

// "FILE:LINE:COL: error: message"
std::string format_diagnostic(std::string_view file_name, const Diagnostic& d);

// Placeholder values for one launch of one job.
struct Placeholders {
    std::string devices;      // {devices}: "0-3" or "0,2,5"
    std::string device_list;  // {device_list}: "0,1,2,3"
    std::string ndevices;     // {ndevices}
    std::string label;        // {label}
    std::string seq;          // {seq}
    std::string port;         // {port}: the first of its ports, empty without
};

// Replaces the six placeholders; any other brace text is left alone.
std::string expand_placeholders(std::string_view command, const Placeholders& values);

}  // namespace pto::cmdfile
