#include "cli/options.hpp"

#include <getopt.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string_view>
#include <tuple>
#include <utility>

#include "cli/option_table.hpp"
#include "cli/option_values.hpp"
#include "common/text.hpp"
#include "devices/port_pool.hpp"

namespace pto::cli {

Expected<Options> parse_options(int argc, char** argv)
{
    Options o;
    // Inside a job of a run (PTO_PAR_SEQ is set in every job), a nested run
    // is local on that job's devices: an inherited PTO_PAR_LAUNCHER=slurm
    // would make it start steps anywhere in the allocation.
    const bool in_job = std::getenv("PTO_PAR_SEQ") != nullptr;
    if (const char* p = std::getenv("PTO_PAR_LAUNCHER"); p != nullptr && *p != '\0' && !in_job) {
        auto slurm = parse_launcher(p, "$PTO_PAR_LAUNCHER");
        if (!slurm)
            return tl::unexpected(slurm.error());
        o.slurm = *slurm;
    }
    // Its ports too: those its job was given, which the outer run leases
    // for it; --ports still wins.
    if (const char* p = std::getenv("PTO_PAR_PORTS"); p != nullptr && in_job)
        if (const auto range = parse_port_range(p))
            std::tie(o.port_low, o.port_high) = *range;
    if (const char* p = std::getenv("PTO_PLATFORM"); p != nullptr && *p != '\0')
        o.platform = p;
    else
        o.platform = "hw";

    optind = 0;  // a full re-scan: parse_options may run more than once (tests)
    opterr = 0;  // our own messages, not getopt's
    for (;;) {
        const int c = getopt_long(argc, argv, ":d:j:p:xe:nqvhV", long_options, nullptr);
        if (c == -1)
            break;
        const char* arg = optarg;
        // The word getopt just consumed, for messages about it.
        const char* name = argv[std::min(std::max(optind - 1, 1), argc - 1)];
        switch (c) {
        case 'd': o.devices = arg; break;
        case 'j': {
            auto j = parse_jobs(arg);
            if (!j)
                return tl::unexpected(j.error());
            o.jobs = *j == 0 ? std::nullopt : std::optional<std::size_t>(*j);
            break;
        }
        case 'p':
            if (*arg == '\0')
                return fail("--platform needs a non-empty name");
            o.platform = arg;
            break;
        case 'x': o.fail_fast = true; break;
        case 'e':
            if (std::string_view(arg) == "none") {
                o.device_env_none = true;
                break;
            }
            if (!text::is_env_name(arg))
                return fail(std::string("invalid value '") + arg +
                            "' for --device-env: expected a variable name like CUDA_VISIBLE_DEVICES");
            if (std::find(o.device_env.begin(), o.device_env.end(), arg) == o.device_env.end())
                o.device_env.emplace_back(arg);
            break;
        case 'n': o.dry_run = true; break;
        case 'q': o.verbosity = -1; break;
        case 'v': o.verbosity = 1; break;
        case 'h': o.help = true; break;
        case 'V': o.version = true; break;
        case opt_kill_grace:
        case opt_timeout:
        case opt_job_timeout:
        case opt_dump_grace:
        case opt_device_check_timeout: {
            const bool grace = c == opt_kill_grace || c == opt_dump_grace;
            const char* opt_name = c == opt_kill_grace    ? "--kill-grace"
                                   : c == opt_timeout     ? "--timeout"
                                   : c == opt_job_timeout ? "--job-timeout"
                                   : c == opt_dump_grace  ? "--dump-grace"
                                                          : "--device-check-timeout";
            auto v = parse_seconds_option(opt_name, arg, grace);
            if (!v)
                return tl::unexpected(v.error());
            if (c == opt_kill_grace)
                o.kill_grace_s = *v;
            else if (c == opt_timeout)
                o.timeout_s = *v;
            else if (c == opt_job_timeout)
                o.job_timeout_s = *v;
            else if (c == opt_dump_grace)
                o.dump_grace_s = *v;
            else
                o.device_check_timeout_s = *v;
            break;
        }
        case opt_output: {
            auto m = parse_output(arg);
            if (!m)
                return tl::unexpected(m.error());
            o.output = *m;
            break;
        }
        case opt_json: o.json_path = arg; break;
        case opt_junit: o.junit_path = arg; break;
        case opt_junit_output_limit: {
            auto limit = parse_bytes(arg, "--junit-output-limit");
            if (!limit)
                return tl::unexpected(limit.error());
            o.junit_output_limit = *limit;
            break;
        }
        case opt_tag: o.tag = true; break;
        case opt_log_dir: o.log_dir = arg; break;
        case opt_lock_dir:
            if (*arg == '\0')
                return fail("--lock-dir needs a directory, or 'none' for no leases across runs");
            o.lock_dir = arg;
            break;
        case opt_shell:
            if (*arg == '\0')
                return fail("--shell needs a path");
            o.shell = arg;
            break;
        case opt_contain:
            if (std::string_view(arg) == "auto")
                o.contain = Containment::automatic;
            else if (std::string_view(arg) == "cgroup")
                o.contain = Containment::cgroup;
            else if (std::string_view(arg) == "pgroup")
                o.contain = Containment::process_group;
            else
                return fail("invalid value '" + std::string(arg) + "' for --contain: expected auto, cgroup or pgroup");
            break;
        case opt_history:
            if (*arg == '\0')
                return fail("--history needs a file");
            o.history.emplace_back(arg);
            break;
        case opt_order:
            if (std::string_view(arg) == "file")
                o.order = plan::Order::file;
            else if (std::string_view(arg) == "longest")
                o.order = plan::Order::longest;
            else
                return fail("invalid value '" + std::string(arg) + "' for --order: expected file or longest");
            break;
        case opt_shard: {
            auto shard = plan::parse_shard(arg);
            if (!shard)
                return tl::unexpected(shard.error());
            o.shard = *shard;
            break;
        }
        case opt_ports: {
            const auto range = parse_port_range(arg);
            if (!range)
                return fail("invalid value '" + std::string(arg) +
                            "' for --ports: expected LO-HI with 1 <= LO <= HI <= 65535, e.g. 29500-30499");
            std::tie(o.port_low, o.port_high) = *range;
            break;
        }
        case opt_backfill: o.backfill = true; break;
        case opt_retries: {
            const std::string_view text(arg);
            int n = 0;
            const auto r = std::from_chars(text.data(), text.data() + text.size(), n);
            if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size() || n < 0 || n > 100)
                return fail("invalid value '" + std::string(text) + "' for --retries: expected an integer from 0 to 100");
            o.retries = n;
            break;
        }
        case opt_device_check:
            if (std::string_view(arg).find_first_not_of(" \t") == std::string_view::npos)
                return fail("--device-check needs a command, e.g. --device-check 'nvidia-smi -i {devices}'");
            o.device_check = arg;
            break;
        case opt_device_slots: {
            const std::string_view text(arg);
            std::size_t n = 0;
            const auto r = std::from_chars(text.data(), text.data() + text.size(), n);
            if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size() || n < 1 || n > 1024)
                return fail("invalid value '" + std::string(text) +
                            "' for --device-slots: expected an integer from 1 to 1024");
            o.device_slots = n;
            break;
        }
        case opt_rerun_failed:
            if (*arg == '\0')
                return fail("--rerun-failed needs a file");
            o.rerun_failed = arg;
            break;
        case opt_color:
        case opt_progress: {
            auto when = one_of(arg, c == opt_color ? "--color" : "--progress", {"auto", "always", "never"});
            if (!when)
                return tl::unexpected(when.error());
            (c == opt_color ? o.color : o.progress) = std::move(*when);
            break;
        }
        case opt_ci: {
            auto kind = one_of(arg, "--ci", {"auto", "github", "gitlab", "none"});
            if (!kind)
                return tl::unexpected(kind.error());
            o.ci = std::move(*kind);
            break;
        }
        case opt_launcher: {
            auto slurm = parse_launcher(arg, "--launcher");
            if (!slurm)
                return tl::unexpected(slurm.error());
            o.slurm = *slurm;
            break;
        }
        case ':':
            return fail(std::string("option '") + name + "' needs a value");
        default:
            if (optopt != 0)
                return fail(std::string("unknown option '-") + static_cast<char>(optopt) + "'");
            return fail(std::string("unknown option '") + name + "'");
        }
    }
    if (argc - optind > 1)
        return fail(std::string("more than one FILE given ('") + argv[optind] + "', '" + argv[optind + 1] +
                    "'); commands come from one file or standard input");
    if (optind < argc)
        o.file = argv[optind];
    return o;
}

}  // namespace pto::cli
