#include "cli/dry_run.hpp"

#include <cstdio>

#include <pto/devices.hpp>

#include "common/text.hpp"

namespace pto::cli {

void print_plan(std::ostream& out, std::span<const cmdfile::JobSpec> specs,
                std::span<const std::optional<double>> expected, const std::string& header)
{
    out << "# " << header << "\n# seq\tlabel\tdevices\ttimeout\texpected\tline\tcommand\n";
    for (std::size_t i = 0; i < specs.size(); ++i) {
        const auto& s = specs[i];
        std::string timeout = "-";
        char buf[32];
        if (s.timeout_s) {
            std::snprintf(buf, sizeof buf, "%gs", *s.timeout_s);
            timeout = buf;
        }
        std::string expect = "-";
        if (i < expected.size() && expected[i]) {
            std::snprintf(buf, sizeof buf, "%.2fs", *expected[i]);
            expect = buf;
        }
        const std::string devices =
            s.slots > 0 ? std::to_string(s.slots) + (s.slots == 1 ? " slot" : " slots") : std::to_string(s.devices);
        // As in status lines: a label or command cannot pass for a line break or
        // act on the terminal, and a tab stays a column separator.
        out << s.seq << '\t' << text::printable(s.label) << '\t' << devices << '\t' << timeout << '\t' << expect
            << '\t' << s.line << '\t' << text::printable(s.command) << '\n';
    }
}

void print_slurm_plan(std::ostream& out, std::span<const cmdfile::JobSpec> specs,
                      std::span<const slurm::NodeDevices> nodes)
{
    for (const auto& n : nodes)
        out << "# node " << text::printable(n.name) << ": GPUs " << (n.ids.empty() ? std::string("none") : format_device_range(n.ids))
            << "\n";
    out << "# seq\tlabel\tdevices\tnodes\n";
    for (const auto& s : specs) {
        std::string where;
        for (const auto& n : nodes)
            if (static_cast<std::size_t>(s.devices) <= n.ids.size())
                where += (where.empty() ? "" : ",") + n.name;
        out << "# " << s.seq << '\t' << text::printable(s.label) << '\t' << s.devices << '\t' << where << '\n';
    }
}

}  // namespace pto::cli
