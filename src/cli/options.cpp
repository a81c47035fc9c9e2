#include "cli/options.hpp"

#include <getopt.h>


#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <tuple>

#include "common/seconds.hpp"
#include "common/text.hpp"
#include "devices/port_pool.hpp"

namespace pto::cli {
namespace {

enum LongOnly {
    opt_kill_grace = 256,
    opt_timeout,
    opt_job_timeout,
    opt_dump_grace,
    opt_output,
    opt_json,
    opt_junit,
    opt_log_dir,
    opt_shell,
    opt_contain,
    opt_history,
    opt_order,
    opt_shard,
    opt_rerun_failed,
    opt_ports,
    opt_retries,
    opt_backfill,
    opt_launcher,
    opt_color,
    opt_ci,
    opt_progress,
    opt_device_slots,
    opt_device_check,
    opt_device_check_timeout,
    opt_tag,
    opt_junit_output_limit,
    opt_lock_dir,
};

const option long_options[] = {
    {"devices", required_argument, nullptr, 'd'},
    {"device", required_argument, nullptr, 'd'},
    {"jobs", required_argument, nullptr, 'j'},
    {"platform", required_argument, nullptr, 'p'},
    {"fail-fast", no_argument, nullptr, 'x'},
    {"kill-grace", required_argument, nullptr, opt_kill_grace},
    {"timeout", required_argument, nullptr, opt_timeout},
    {"job-timeout", required_argument, nullptr, opt_job_timeout},
    {"dump-grace", required_argument, nullptr, opt_dump_grace},
    {"device-env", required_argument, nullptr, 'e'},
    {"output", required_argument, nullptr, opt_output},
    {"json", required_argument, nullptr, opt_json},
    {"junit", required_argument, nullptr, opt_junit},
    {"log-dir", required_argument, nullptr, opt_log_dir},
    {"lock-dir", required_argument, nullptr, opt_lock_dir},
    {"dry-run", no_argument, nullptr, 'n'},
    {"quiet", no_argument, nullptr, 'q'},
    {"verbose", no_argument, nullptr, 'v'},
    {"shell", required_argument, nullptr, opt_shell},
    {"contain", required_argument, nullptr, opt_contain},
    {"history", required_argument, nullptr, opt_history},
    {"order", required_argument, nullptr, opt_order},
    {"shard", required_argument, nullptr, opt_shard},
    {"rerun-failed", required_argument, nullptr, opt_rerun_failed},
    {"ports", required_argument, nullptr, opt_ports},
    {"retries", required_argument, nullptr, opt_retries},
    {"backfill", no_argument, nullptr, opt_backfill},
    {"launcher", required_argument, nullptr, opt_launcher},
    {"color", required_argument, nullptr, opt_color},
    {"ci", required_argument, nullptr, opt_ci},
    {"progress", required_argument, nullptr, opt_progress},
    {"device-slots", required_argument, nullptr, opt_device_slots},
    {"device-check", required_argument, nullptr, opt_device_check},
    {"device-check-timeout", required_argument, nullptr, opt_device_check_timeout},
    {"tag", no_argument, nullptr, opt_tag},
    {"junit-output-limit", required_argument, nullptr, opt_junit_output_limit},
    {"help", no_argument, nullptr, 'h'},
    {"version", no_argument, nullptr, 'V'},
    {nullptr, 0, nullptr, 0},
};

Expected<double> parse_seconds_option(const char* opt, const char* text, bool allow_zero)
{
    auto v = parse_seconds(text, allow_zero ? SecondsMin::zero : SecondsMin::above_zero);
    if (!v)
        return fail(std::string("invalid value '") + text + "' for " + opt + ": " + v.error().message);
    return v;
}

Expected<std::size_t> parse_jobs(const char* text)
{
    if (std::strcmp(text, "auto") == 0)
        return 0;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(text, &end, 10);
    if (*text == '\0' || *end != '\0' || errno != 0 || v < 1 || v > 100000)
        return fail(std::string("invalid value '") + text + "' for --jobs: expected a whole number >= 1 or 'auto'");
    return static_cast<std::size_t>(v);
}

Expected<OutputMode> parse_output(const char* text)
{
    const std::string_view t = text;
    if (t == "group")
        return OutputMode::group;
    if (t == "stream")
        return OutputMode::stream;
    if (t == "failed")
        return OutputMode::failed;
    if (t == "none")
        return OutputMode::none;
    return fail("invalid value '" + std::string(t) + "' for --output: expected group, stream, failed or none");
}

// `text` if it is one of `words`, else the error naming them all:
// "expected auto, always or never".
Expected<std::string> one_of(std::string_view text, const char* option, std::initializer_list<std::string_view> words)
{
    std::string list;
    std::size_t i = 0;
    for (const auto w : words) {
        if (text == w)
            return std::string(text);
        list += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ");
        list += w;
        ++i;
    }
    return fail("invalid value '" + std::string(text) + "' for " + option + ": expected " + list);
}

// BYTES: a whole number, optionally followed by K, M or G (powers of 1024).
Expected<std::uint64_t> parse_bytes(std::string_view text, const char* option)
{
    std::uint64_t v = 0;
    const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
    std::string_view unit = text.substr(static_cast<std::size_t>(r.ptr - text.data()));
    int shift = 0;
    if (unit == "K")
        shift = 10;
    else if (unit == "M")
        shift = 20;
    else if (unit == "G")
        shift = 30;
    else if (!unit.empty())
        shift = -1;
    if (text.empty() || r.ec != std::errc() || shift < 0 || v > (std::uint64_t{1} << 40) >> shift)
        return fail("invalid value '" + std::string(text) + "' for " + option +
                    ": expected a number of bytes up to 1T, optionally with K, M or G, e.g. 4M");
    return v << shift;
}

Expected<bool> parse_launcher(std::string_view text, const char* where)
{
    if (text == "local")
        return false;
    if (text == "slurm")
        return true;
    return fail("invalid value '" + std::string(text) + "' for " + where + ": expected local or slurm");
}

}  // namespace

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
        const int c = getopt_long(argc, argv, "+:d:j:p:xe:nqvhV", long_options, nullptr);
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

std::string help_text()
{
    return R"(Usage: pto-par [OPTION]... [FILE]
Run the commands of FILE (or standard input) in parallel, each job holding its
own devices from a pool, so that no two running jobs ever share a device.

Devices and parallelism:
  -d, --devices SPEC     device pool: 0-3, 0,2-4,7, none, or auto (default
                         auto: the first of $PTO_PAR_DEVICES,
                         $ASCEND_RT_VISIBLE_DEVICES, $CUDA_VISIBLE_DEVICES,
                         $SLURM_STEP_GPUS, $SLURM_JOB_GPUS that is set, else
                         /dev/davinciN, else /dev/nvidiaN, else no devices)
      --device SPEC      same as --devices
  -j, --jobs N|auto      most jobs at once (default auto: the pool's slots on
                         hardware, min(nproc, slots) on a *sim platform, nproc
                         with no devices)
  -p, --platform NAME    platform; a name ending in 'sim' is a simulator
                         (default $PTO_PLATFORM, else hw)
      --device-slots K   K slots per device: a line's slots=S takes S of one
                         device, beside other such jobs (default 1)
      --device-check CMD run CMD (with {devices}, PTO_PAR_DEVICES: one device)
                         on each device before its first job and after a job
                         on it failed; a device whose check fails is withheld
                         and that job runs again elsewhere, once
      --device-check-timeout SECS  a check's time limit (default 60)
  -e, --device-env NAME  also give each job its device ids in variable NAME
                         (repeatable); the variable the pool came from gets
                         them without -e; -e none: it is left as it was
      --shell PATH       run each line as PATH -c LINE (default /bin/sh)

Failures and limits:
  -x, --fail-fast        after the first failure start nothing more and stop
                         the running jobs
      --kill-grace SECS  SIGTERM to SIGKILL grace when stopping jobs (default 5)
      --timeout SECS     time limit for the whole run
      --job-timeout SECS time limit for each job (a line's timeout= wins)
      --dump-grace SECS  time a timed-out job gets to print its stacks
                         (default 2)
      --contain HOW      keep each job together so all of it can be stopped:
                         cgroup (a cgroup v2 per job), pgroup (its process
                         group), auto (default: cgroup where possible)
      --launcher HOW     local (default, or $PTO_PAR_LAUNCHER), or slurm:
                         each job a step of the Slurm allocation this runs
                         in, on a node with the GPUs it needs

Large suites:
      --history FILE     an earlier run's --json report, for each job's last
                         duration and status (repeatable; a missing FILE is
                         fine)
      --order HOW        file (default: the order of FILE) or longest (jobs
                         without history first, then the longest first)
      --backfill         while the next job waits for devices, start a later
                         one that history says ends before it could start
      --shard K/N        run only shard K of N: the split depends only on FILE
                         and the history, so N machines run disjoint parts
      --rerun-failed FILE  run only the jobs that did not pass in that --json
                         report, and those it does not know
      --ports LO-HI      the TCP ports a line's ports=N draws from (default
                         29500-30499)
      --lock-dir DIR     lease each device and port in DIR while a job uses
                         it, so that other pto-par runs on this machine never
                         get it at once (default: $PTO_PAR_LOCK_DIR, else
                         /run/lock/pto-par); none: no leases, and such a
                         run is not seen by others
      --retries N        run a job that fails or times out again, up to N more
                         times (a line's retries= wins); passing later is flaky

Output and reports:
      --output MODE      group (default: each job's output whole when it
                         ends, or as it comes while it runs alone), stream
                         (lines as they come, prefixed [label]), failed
                         (group, only jobs that did not pass), none
      --json FILE        one JSON object per job (JSON Lines)
      --junit FILE       JUnit XML report
      --junit-output-limit BYTES  most of a job's output in --junit (default
                         4M): past it, its head and tail
      --tag              with --output group or failed, prefix each line of a
                         block with [label], as stream does
      --log-dir DIR      each job's output in its own file
      --color WHEN       colour the verdicts on standard error: auto (default:
                         on a terminal, unless NO_COLOR is set or TERM=dumb),
                         always, never
      --ci KIND          mark each job's output as a foldable section of a CI
                         log and annotate failures: auto (default: from
                         GITHUB_ACTIONS / GITLAB_CI), github, gitlab, none
      --progress WHEN    a progress line kept at the bottom of the terminal:
                         auto (default: when standard error is a terminal,
                         TERM is not dumb and no CI log is written), always,
                         never
  -n, --dry-run          check FILE and print the plan; run nothing
  -q, --quiet            status lines only for jobs that did not pass
  -v, --verbose          more status lines
  -h, --help             this help
  -V, --version          the version

Each line of FILE is one job, run by the shell; '@2 CMD' needs two devices,
'@0 CMD' none, '@slots=1 CMD' one slot of a device, '@label=NAME,timeout=SECS'
sets more (see pto-par.cmds(5)).
{devices}, {device_list}, {ndevices}, {label} and {seq} are replaced in CMD.

Exit status: 0 all passed, 1 some job failed, timed out or was killed,
2 usage or file error (nothing ran), 124 --timeout expired, 128+N stopped
by signal N.
)";
}

}  // namespace pto::cli
