#include "cli/dry_run.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include <pto/devices.hpp>

#include "common/text.hpp"
#include "devices/leases.hpp"

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

std::string held_leases_text(const std::string& lock_dir, const DiscoveredPool& pool, std::span<const Job> jobs,
                             int port_low, int port_high)
{
    std::vector<std::string> keys;
    std::map<std::string, std::string> called;  // by key: what the line calls it
    for (const int id : pool.ids) {
        const std::string identity = pool.value_for(pool.variable, std::span<const int>(&id, 1));
        const auto key = leases::device_key(identity);
        called[key] = "device " + identity;
        keys.push_back(key);
    }
    const bool ports = std::any_of(jobs.begin(), jobs.end(), [](const Job& j) { return j.port_count > 0; });
    for (int p = port_low; ports && p <= port_high; ++p) {
        called[leases::port_key(p)] = "port " + std::to_string(p);
        keys.push_back(leases::port_key(p));
    }
    const auto held = leases::LockDir::held_now(lock_dir, keys);
    if (held.empty())
        return {};
    std::string text = "\n# held now by other runs (jobs wait for them): ";
    for (std::size_t i = 0; i < held.size(); ++i) {
        text += (i == 0 ? "" : ", ") + text::printable(called[held[i].key]);
        text += held[i].holder.pid > 0 ? " (" + held[i].holder.text() + ")" : std::string(" (pid unknown)");
    }
    return text;
}

}  // namespace pto::cli
