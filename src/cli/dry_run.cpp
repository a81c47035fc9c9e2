#include "cli/dry_run.hpp"

#include <cstdio>

namespace pto::cli {

std::string format_plan(std::span<const cmdfile::JobSpec> specs, const std::string& header)
{
    std::string out = "# " + header + "\n# seq\tlabel\tdevices\ttimeout\tline\tcommand\n";
    for (const auto& s : specs) {
        std::string timeout = "-";
        if (s.timeout_s) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%gs", *s.timeout_s);
            timeout = buf;
        }
        out += std::to_string(s.seq) + "\t" + s.label + "\t" + std::to_string(s.devices) + "\t" + timeout + "\t" +
               std::to_string(s.line) + "\t" + s.command + "\n";
    }
    return out;
}

}  // namespace pto::cli
