#include "fuzz_checks.hpp"

#include <cstdlib>
#include <set>
#include <string>

#include <pto/devices.hpp>

#include "cmdfile/commands_file.hpp"
#include "runner/slurm_step.hpp"

namespace pto::fuzz {

// parse_device_range never crashes, and what it accepts survives a
// format/parse round trip unchanged.
void check_device_range(std::string_view text)
{
    const auto ids = parse_device_range(text);
    if (!ids) {
        if (ids.error().message.empty())
            std::abort();
        return;
    }
    for (std::size_t i = 0; i < ids->size(); ++i)
        if ((*ids)[i] < 0 || (*ids)[i] > max_device_id || (i > 0 && (*ids)[i - 1] >= (*ids)[i]))
            std::abort();
    const auto again = parse_device_range(format_device_range(*ids));
    if (!again || *again != *ids)
        std::abort();
}

// The parser returns jobs or errors, never both, and what it accepts keeps
// its promises: seq 1..n, unique non-empty labels, commands within the limit.
void check_commands_file(std::string_view text)
{
    using namespace cmdfile;
    const ParseResult r = parse_commands(text);
    if (!r.errors.empty() && !r.jobs.empty())
        std::abort();
    for (const auto& d : r.errors)
        if (d.line == 0 || d.col == 0 || d.message.empty() || format_diagnostic("f", d).empty())
            std::abort();
    std::set<std::string> labels;
    for (std::size_t i = 0; i < r.jobs.size(); ++i) {
        const auto& j = r.jobs[i];
        if (j.seq != i + 1 || j.line == 0 || j.devices < 0 || j.label.empty() || !labels.insert(j.label).second ||
            j.command.size() >= max_command_bytes)
            std::abort();
        (void)expand_placeholders(j.command, Placeholders{"0-3", "0,1,2,3", "4", j.label, std::to_string(j.seq), "29500"});
    }
}

// A step's output stream (srun's lines, the agent's frames, the job's
// bytes), cut in two where its first byte says: the filter never throws, and
// a stream with no frame mark and no line of Slurm's is the job's, unchanged.
void check_step_stream(std::string_view text)
{
    const std::size_t cut = text.empty() ? 0 : static_cast<unsigned char>(text[0]) % (text.size() + 1);
    std::size_t notices = 0;
    runner::StepControl control{"scancel", nullptr, [&](const std::string&) { ++notices; }};
    runner::StepState step("n1", control);
    std::string out(step.filter(text.substr(0, cut)));
    out += step.filter(text.substr(cut));
    out += step.take_pending();
    (void)step.take_verdicts();
    const bool slurm_line = text.starts_with("srun: ") || text.starts_with("slurmstepd") ||
                            text.find("\nsrun: ") != std::string_view::npos ||
                            text.find("\nslurmstepd") != std::string_view::npos;
    if (text.find('\x1e') == std::string_view::npos && !slurm_line && (out != text || notices != 0))
        std::abort();
}

}  // namespace pto::fuzz
