#include "cli/exec_size.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <numeric>
#include <string_view>
#include <vector>

#include "cmdfile/commands_file.hpp"

extern char** environ;

namespace pto::cli {
namespace {

// The text a device id is handed out as, for its length.
std::size_t name_length(const DiscoveredPool& pool, int id)
{
    const auto i = static_cast<std::size_t>(id);
    const std::size_t number = std::to_string(id).size();
    return i < pool.entries.size() ? std::max(number, pool.entries[i].size()) : number;
}

std::string_view name_of(std::string_view entry)
{
    return entry.substr(0, entry.find('='));
}

}  // namespace

ExecLimits exec_limits()
{
    // Linux's MAX_ARG_STRLEN is 32 pages; the command file's own limit
    // (max_command_bytes) is that for 4 KiB pages.
    const long page = sysconf(_SC_PAGESIZE);
    const long total = sysconf(_SC_ARG_MAX);
    return {page > 0 ? 32 * static_cast<std::size_t>(page) : cmdfile::max_command_bytes,
            total > 0 ? static_cast<std::size_t>(total) : 128 * 1024};
}

bool report_exec_too_large(const std::string& file, std::span<const Job> jobs, const DiscoveredPool& pool,
                           int port_low, int port_high, const ExecLimits& limits)
{
    // The worst devices for any job needing n: the n whose names are
    // longest (handed out ascending, as the pool does).
    std::vector<int> by_length(pool.ids);
    std::stable_sort(by_length.begin(), by_length.end(),
                     [&pool](int a, int b) { return name_length(pool, a) > name_length(pool, b); });
    std::size_t longest = 0;
    for (const int id : by_length)
        longest = std::max(longest, name_length(pool, id));
    std::size_t inherited = 0;
    for (char** e = environ; *e != nullptr; ++e)
        inherited += std::strlen(*e) + 1 + sizeof(char*);

    bool any = false;
    for (const Job& job : jobs) {
        if (!job.build)
            continue;
        // Most jobs are far from any limit: only those that might not be
        // are built in their worst case.
        const std::size_t braces = static_cast<std::size_t>(std::count(job.command.begin(), job.command.end(), '{'));
        const std::size_t list = job.device_count * (longest + 1);
        const std::size_t bound = job.command.size() + (braces + 8) * (list + 64);
        if (bound < limits.one_string && bound + inherited < limits.total)
            continue;
        const std::size_t n = std::min(job.device_count, by_length.size());
        std::vector<int> devices(by_length.begin(), by_length.begin() + static_cast<std::ptrdiff_t>(n));
        std::sort(devices.begin(), devices.end());
        std::vector<int> ports(std::min<std::size_t>(job.port_count, static_cast<std::size_t>(port_high - port_low + 1)));
        std::iota(ports.begin(), ports.end(), port_high + 1 - static_cast<int>(ports.size()));
        const auto say = [&](const std::string& message) {
            any = true;
            std::cerr << cmdfile::format_diagnostic(file, {job.line, 1, "job '" + job.label + "' " + message}) << "\n";
        };
        auto launch = job.build(Allocation{devices, ports});
        if (!launch) {
            say(launch.error().message);
            continue;
        }
        std::size_t total = 0;
        std::string too_long;
        const auto count = [&](const std::string& s) {
            total += s.size() + 1 + sizeof(char*);
            if (s.size() + 1 > limits.one_string && too_long.empty())
                too_long = s.size() > 60 ? std::string(name_of(s)) : s;
        };
        for (const auto& a : launch->argv)
            count(a);
        for (const auto& e : launch->env)
            count(e);
        total += inherited;
        for (char** e = environ; *e != nullptr; ++e)
            for (const auto& o : launch->env)
                if (name_of(*e) == name_of(o)) {
                    total -= std::strlen(*e) + 1 + sizeof(char*);
                    break;
                }
        if (!too_long.empty())
            say("with " + std::to_string(n) + " devices could get a " + too_long +
                " longer than the kernel takes in one argument or variable (" + std::to_string(limits.one_string - 1) +
                " bytes); lower its @N");
        else if (total > limits.total)
            say("with " + std::to_string(n) + " devices could need " + std::to_string(total) +
                " bytes of arguments and environment, more than the kernel takes (" + std::to_string(limits.total) +
                "; see ulimit -s); lower its @N or shrink the environment");
    }
    return any;
}

}  // namespace pto::cli
