#include "cli/dry_run.hpp"

#include <cstdio>

namespace pto::cli {

void print_plan(std::ostream& out, std::span<const cmdfile::JobSpec> specs, const std::string& header)
{
    out << "# " << header << "\n# seq\tlabel\tdevices\ttimeout\tline\tcommand\n";
    for (const auto& s : specs) {
        std::string timeout = "-";
        if (s.timeout_s) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%gs", *s.timeout_s);
            timeout = buf;
        }
        out << s.seq << '\t' << s.label << '\t' << s.devices << '\t' << timeout << '\t' << s.line << '\t' << s.command
            << '\n';
    }
}

}  // namespace pto::cli
