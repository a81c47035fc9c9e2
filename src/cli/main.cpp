// pto-par: the edge where values become messages and exit codes.
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <span>

#include <pto/devices.hpp>
#include <pto/scheduler.hpp>

#include "cli/close_reports.hpp"
#include "cli/dry_run.hpp"
#include "cli/descriptors.hpp"
#include "cli/device_variables.hpp"
#include "cli/early_signals.hpp"
#include "cli/finish_output.hpp"
#include "cli/exec_size.hpp"
#include "cli/job_builder.hpp"
#include "cli/options.hpp"
#include "cli/plan_run.hpp"
#include "cli/pool_choice.hpp"
#include "cli/preflight.hpp"
#include "cli/process_limit.hpp"
#include "cli/read_input.hpp"
#include "cli/rerun_command.hpp"
#include "cli/slurm.hpp"
#include "cli/standard_streams.hpp"
#include "cli/static_checks.hpp"
#include "cmdfile/commands_file.hpp"
#include "devices/discovery.hpp"
#include "devices/leases.hpp"
#include "output/sink.hpp"
#include "plan/plan.hpp"
#include "report/fanout.hpp"
#include "report/json_lines.hpp"
#include "report/junit_report.hpp"
#include "report/log_dir.hpp"
#include "report/output_writer.hpp"
#include "report/progress_line.hpp"
#include "report/status_lines.hpp"
#include "common/replaced_file.hpp"
#include "common/signal_names.hpp"
#include "common/unique_fd.hpp"
#include "runner/launcher.hpp"
#include "runner/signal_channel.hpp"

namespace {

using namespace pto;

constexpr int exit_usage = 2;
constexpr int exit_run_timeout = 124;  // as timeout(1)

int usage_error(const std::string& message)
{
    std::cerr << "pto-par: error: " << message << "\nTry 'pto-par --help' for more information.\n";
    return exit_usage;
}

int error(const std::string& message)
{
    std::cerr << "pto-par: error: " << message << "\n";
    return exit_usage;
}

// The JUnit testsuite's name: the commands file's name without its
// directory and extension, "pto-par" for standard input.
std::string suite_name(const std::string& file)
{
    if (file == "-")
        return "pto-par";
    std::string name = file.substr(file.find_last_of('/') + 1);
    if (const auto dot = name.rfind('.'); dot != std::string::npos && dot > 0)
        name.erase(dot);
    return name.empty() ? "pto-par" : name;
}

int run(int argc, char** argv, cli::EarlySignals& signals)
{
    auto parsed = cli::parse_options(argc, argv);
    if (!parsed)
        return usage_error(parsed.error().message);
    const cli::Options& opt = *parsed;
    if (opt.help) {
        std::cout << cli::help_text();
        return 0;
    }
    if (opt.version) {
        std::cout << "pto-par " PTO_PAR_VERSION "\n";
        return 0;
    }
    if (opt.slurm && opt.device_slots)
        return usage_error("--device-slots does not go with --launcher slurm: sharing a GPU between steps needs "
                           "Slurm's own sharing (--gres=shard)");
    const std::size_t device_slots = opt.device_slots.value_or(1);
    std::optional<cli::SlurmSetup> slurm;
    if (opt.slurm) {
        auto s = cli::slurm_setup(opt, argc, argv);
        if (!s)
            return usage_error(s.error().message);
        slurm = std::move(*s);
    }
    auto pool = slurm ? Expected<DiscoveredPool>(DiscoveredPool{{}, "the Slurm allocation", {}, {}})
                      : cli::choose_pool(opt.devices);
    if (!pool)
        return usage_error(pool.error().message);

    const auto lock_dir = leases::choose_lock_dir(opt.lock_dir, std::getenv(leases::lock_dir_variable));
    if (!lock_dir)
        return usage_error(lock_dir.error().message);
    if (auto ok = cli::check_shell(opt.shell); !ok)
        return usage_error(ok.error().message);
    auto in = cli::open_input(opt.file);
    if (!in)
        return error(in.error().message);
    // Before reading: `pto-par --json tests.cmds` on a terminal would
    // otherwise wait for commands on standard input first.
    if (auto ok = cli::check_reports(opt, in->identity); !ok)
        return usage_error(ok.error().message);
    auto input = cli::read_input(*in, signals);
    in->owned.reset();  // read in full: its descriptor is one a job may need
    if (!input)
        return error(input.error().message);
    if (input->stop_signal != 0)
        return 128 + input->stop_signal;
    const std::string display_name = opt.file == "-" ? "<stdin>" : opt.file;
    if (input->bad) {
        std::cerr << cmdfile::format_diagnostic(display_name, *input->bad) << "\n";
        return exit_usage;
    }
    auto parsed_file = cmdfile::parse_commands(input->text);
    std::string().swap(input->text);  // parsed: the jobs hold copies of what they need
    if (!parsed_file.errors.empty()) {
        for (const auto& d : parsed_file.errors)
            std::cerr << cmdfile::format_diagnostic(display_name, d) << "\n";
        return exit_usage;
    }
    auto planned = cli::plan_run(opt, std::move(parsed_file.jobs));
    if (!planned)
        return error(planned.error().message);
    const auto& specs = planned->specs;
    if (slurm ? cli::report_oversized_per_node(display_name, specs, slurm->nodes)
              : cli::report_oversized(display_name, specs, *pool, opt.devices == "auto"))
        return exit_usage;
    if (cli::report_slots(display_name, specs, slurm.has_value(), device_slots))
        return exit_usage;
    if (cli::report_ports(display_name, specs, opt.port_low, opt.port_high))
        return exit_usage;
    const cli::JobWorld world{opt.shell, cli::device_variables(opt, *pool, slurm.has_value()), &*pool, opt.retries, slurm ? slurm->self : std::string(),
                              opt.kill_grace_s, opt.lock_dir.value_or(""),
                              {slurm ? opt.device_check : std::string(), opt.device_check_timeout_s}};
    auto jobs = cli::build_jobs(specs, world);
    if (!slurm && cli::report_exec_too_large(display_name, jobs, *pool, opt.port_low, opt.port_high, cli::exec_limits()))
        return exit_usage;
    if (auto ok = cli::check_distinct_outputs(opt, in->identity,
                                              opt.log_dir.empty() ? std::vector<std::string>()
                                                                  : report::log_file_names(jobs));
        !ok)
        return usage_error(ok.error().message);
    // -j auto under Slurm: a step per GPU of the allocation (a node per
    // step when it has none).
    const std::size_t max_parallel =
        opt.jobs.value_or(slurm ? std::max(slurm->devices, slurm->nodes.size())
                                : cli::auto_parallel(opt.platform, pool->ids.size() * device_slots));
    const std::string pool_text =
        slurm ? "Slurm job " + slurm->job_id + " nodes " + cli::describe_nodes(slurm->nodes)
              : "pool " + (pool->ids.empty() ? std::string("none") : format_device_range(pool->ids)) + " from " +
                    pool->source + (device_slots > 1 ? ", " + std::to_string(device_slots) + " slots per device" : "");
    const std::string plan_header = pool_text + ", platform " + opt.platform + ", -j " +
                                    std::to_string(max_parallel) + ", " + std::to_string(specs.size()) + " jobs" +
                                    planned->description;
    const auto containment = slurm ? Expected<std::string>("slurmd, as steps (srun --exact -N1 -w NODE)")
                                   : describe_containment(opt.contain);
    if (!containment)
        return usage_error(containment.error().message);
    const auto check_text = [&opt, under_slurm = slurm.has_value()](const std::string& lead) {
        if (opt.device_check.empty())
            return std::string();
        char limit[32];
        std::snprintf(limit, sizeof limit, "%g", opt.device_check_timeout_s);
        return lead +
               (under_slurm ? "each GPU of a node checked by the step that gets it, before its first job there, "
                              "after a job failed on it and after a job timed out on it, by: "
                            : "each device checked before its first job and after a failure on it by: ") +
               opt.device_check + " (at most " + limit + "s)";
    };
    const std::string lease_text =
        slurm        ? std::string("no leases across runs: Slurm shares the allocation's GPUs out")
        : !*lock_dir ? std::string("no leases across runs (--lock-dir none): other runs do not see this one")
                     : "devices and ports leased against other runs in " +
                           (lock_dir->has_value() && !(*lock_dir)->empty()
                                ? **lock_dir
                                : std::string(leases::default_lock_dir) + " (else pto-par-locks in $TMPDIR)");
    if (opt.dry_run) {
        std::string held;
        if (!slurm && *lock_dir)
            held = cli::held_leases_text(lock_dir->value_or(""), *pool, jobs, opt.port_low, opt.port_high);
        cli::print_plan(std::cout, specs, planned->expected,
                        plan_header + "\n# jobs contained by " + *containment + "\n# " + lease_text + held +
                            check_text("\n# "));
        if (slurm)
            cli::print_slurm_plan(std::cout, specs, slurm->nodes);
        std::cout.flush();
        return std::cout ? 0 : 1;
    }

    if (const int sig = cli::stop_signal_now(signals, "the commands file is read; opening the reports"); sig != 0)
        return 128 + sig;

    // Written beside the file and renamed over it at the end, so that a run
    // killed on the way leaves the last report (often the --history) whole.
    ReplacedFile json_file;
    if (!opt.json_path.empty()) {
        auto f = ReplacedFile::open(opt.json_path, "--json file");
        if (!f)
            return error(f.error().message);
        json_file = std::move(*f);
    }

    // The check is run like a job of one device, labelled device-check.
    cmdfile::JobSpec check_spec;
    check_spec.label = "device-check";
    check_spec.command = opt.device_check;
    std::vector<Job> check = cli::build_jobs(std::span<const cmdfile::JobSpec>(&check_spec, 1), world);
    for (std::size_t i = 0; i < jobs.size(); ++i)
        jobs[i].expected_s = planned->expected[i];
    RunOptions ro;
    ro.pool = pool->ids;
    ro.device_slots = device_slots;
    if (!opt.device_check.empty() && !slurm) {
        ro.device_check = [&build = check.front().build](int id) { return build(Allocation{std::span<const int>(&id, 1), {}}); };
        ro.device_check_timeout_s = opt.device_check_timeout_s;
    }
    ro.max_parallel = max_parallel;
    ro.fail_fast = opt.fail_fast;
    ro.backfill = opt.backfill;
    ro.kill_grace_s = opt.kill_grace_s;
    ro.timeout_s = opt.timeout_s;
    ro.job_timeout_s = opt.job_timeout_s;
    ro.dump_grace_s = opt.dump_grace_s;
    ro.containment = opt.contain;
    ro.port_low = opt.port_low;
    ro.port_high = opt.port_high;
    ro.lock_dir = *lock_dir;
    ro.signal_fd = signals.fd();
    // Leased by what a job sees in its device variable, as a nested run
    // started in the job finds them again.
    ro.device_identity = [&found = *pool](int id) { return found.value_for(found.variable, std::span<const int>(&id, 1)); };
    auto inherited = leases::inherited_from([](const char* name) -> const char* { return std::getenv(name); });
    ro.inherited_devices = std::move(inherited.devices);
    ro.inherited_ports = std::move(inherited.ports);
    if (slurm) {
        ro.slurm = slurm->options;
        ro.slurm->device_check = !opt.device_check.empty();
    }

    std::vector<std::string> spill_notes;
    ro.spill_place = choose_spill_place([&spill_notes](const std::string& text) { spill_notes.push_back(text); },
                                        ro.output_memory_limit);
    auto out_sink = output::Sink::open(STDOUT_FILENO, "standard output", ro.spill_place);
    if (!out_sink)
        return error(out_sink.error().message);
    // One ordered writer for both when they are one place: status lines
    // then queue behind the block or line being written.
    const bool one_log = cli::same_destination(STDOUT_FILENO, STDERR_FILENO);
    auto err_sink = one_log ? Expected<std::unique_ptr<output::Sink>>(nullptr)
                            : output::Sink::open(STDERR_FILENO, "standard error", ro.spill_place);
    if (!err_sink)
        return error(err_sink.error().message);
    output::Sink& out = **out_sink;
    output::Sink& err = one_log ? out : **err_sink;
    ro.poll_clients = {&out};
    if (!one_log)
        ro.poll_clients.push_back(&err);
    // Stream mode sees every job's bytes; group mode only the live block's.
    ro.output_live = opt.output == report::OutputMode::stream || opt.output == report::OutputMode::group;

    const char* no_color = std::getenv("NO_COLOR");
    const char* term = std::getenv("TERM");
    const bool colour = opt.color == "always" ||
                        (opt.color == "auto" && isatty(STDERR_FILENO) == 1 && (no_color == nullptr || *no_color == '\0') &&
                         !(term != nullptr && std::string_view(term) == "dumb"));
    report::StatusLines status(err, opt.verbosity, colour);
    for (const auto& text : spill_notes)
        status.note(text);
    const report::CiKind ci = opt.ci == "github"   ? report::CiKind::github
                              : opt.ci == "gitlab" ? report::CiKind::gitlab
                              : opt.ci == "none"   ? report::CiKind::none
                                                   : report::detect_ci(std::getenv("GITHUB_ACTIONS"), std::getenv("GITLAB_CI"));
    // The progress line: on a terminal that shows it, not in a CI log.
    std::unique_ptr<report::ProgressLine> progress;
    if (opt.progress == "always" ||
        (opt.progress == "auto" && ci == report::CiKind::none && isatty(STDERR_FILENO) == 1 &&
         !(term != nullptr && std::string_view(term) == "dumb"))) {
        output::Sink* const same_out = cli::same_terminal(STDOUT_FILENO, STDERR_FILENO) ? &out : nullptr;
        auto line = report::ProgressLine::open(err, same_out, STDERR_FILENO, jobs.size());
        if (line)
            progress = std::move(*line);
        else
            status.note("no progress line: " + line.error().message);
    }
    std::string ci_token;
    if (ci != report::CiKind::none) {
        auto token = report::random_token();
        if (!token)
            return error(token.error().message);
        ci_token = std::move(*token);
    }
    report::OutputWriter output(out, opt.output, ci, std::move(ci_token), opt.tag);
    if (one_log) {
        output.set_one_log();
        status.set_route([&output](std::string_view text, bool now) { output.status(text, now); });
        status.set_verdict_route([&output](std::size_t index, std::string_view text) { output.verdict(index, text); });
        if (progress)
            progress->set_may_draw([&output] { return output.at_line_start(); });
    }
    if (opt.output == report::OutputMode::group) {
        output.set_hold_place(ro.spill_place);
        ro.output_live_for = [&output](std::size_t index) { return output.live_for(index); };
    }
    report::JsonLines json(json_file.fd(), slurm.has_value());
    report::Fanout fanout;
    fanout.add(&status);
    fanout.add(&output);
    if (json_file) {
        json.write_kept(planned->kept_records);
        fanout.add(&json);
    }
    std::optional<report::JunitReport> junit;
    if (!opt.junit_path.empty()) {
        junit.emplace(opt.junit_path, jobs, suite_name(opt.file), opt.junit_output_limit);
        if (auto ok = junit->open(); !ok)
            return error(ok.error().message);
        fanout.add(&*junit);
    }
    std::optional<report::LogDir> logs;
    if (!opt.log_dir.empty()) {
        logs.emplace(opt.log_dir, jobs);
        if (auto ok = logs->open(); !ok)
            return error(ok.error().message);
        fanout.add(&*logs);
    }
    if (progress) {
        // Last, so that it is drawn after the lines of the same event.
        fanout.add(progress.get());
        ro.poll_clients.push_back(progress.get());
        ro.watched_signals = {SIGWINCH, SIGCONT};
    }
    ro.observer = &fanout;
    ro.whole_output = output.needs_whole_output() || junit || logs;
    // The live block's bytes go to standard output in the kernel, unless
    // a report or a log needs them all: then they pass through here, as
    // keeping them takes a copy anyway.
    if (opt.output == report::OutputMode::group && !junit && !logs)
        ro.output_passage = [&output](std::size_t index) { return output.passage_for(index); };

    if (const auto notice = cli::devices_only_in_env_notice(opt, specs, *pool, slurm.has_value()))
        status.note(*notice);
    if (const auto notice = slurm ? std::nullopt : cli::process_limit_notice(max_parallel == 0 ? specs.size()
                                                                                 : std::min(max_parallel, specs.size())))
        status.note(*notice);
    if (!planned->description.empty() && opt.verbosity == 0)
        status.note(std::to_string(specs.size()) + " jobs" + planned->description);
    if (opt.verbosity > 0) {
        // The pid to signal: the guardian beside it has a name of its own.
        status.note("pid " + std::to_string(getpid()) + ", " + plan_header);
        status.note("jobs contained by " + *containment);
        status.note(lease_text);
        if (!world.device_env.empty()) {
            std::string names;
            for (const auto& name : world.device_env)
                names += (names.empty() ? "$" : ", $") + name;
            status.note("each job gets its own devices in " + names + " as well as $PTO_PAR_DEVICES");
        }
        if (!opt.device_check.empty())
            status.note(check_text(""));
    }
    // The weaker guarantee is said, not implied: with devices to hand on,
    // what a process group cannot hold is what may share one.
    if (!slurm && !pool->ids.empty() && containment->starts_with("process groups"))
        status.note("jobs are contained by " + *containment +
                    ": a process a job starts in a session of its own (setsid, a daemon) is not stopped with the "
                    "job and may still use its devices when the next job gets them; cgroups (root on a writable "
                    "cgroup v2, or a delegated systemd scope) would stop it too");

    // Everything of pto-par's own is open now: what is left is the jobs',
    // and with leases the lock directory's two and a lease per device and
    // port of a job.
    std::size_t most_leases = 0;
    for (const Job& j : jobs)
        most_leases = std::max(most_leases, (j.slots > 0 ? 1 : j.device_count) + j.port_count);
    const std::size_t lease_fds = *lock_dir && most_leases > 0 ? cli::lease_run_descriptors + most_leases : 0;
    if (!slurm)
        if (auto ok = cli::check_descriptors(lease_fds + (!containment->starts_with("cgroup") ? cli::job_descriptors_pgroup
                                                          : runner::can_start_in_cgroup()
                                                              ? cli::job_descriptors_cgroup_clone3
                                                              : cli::job_descriptors_cgroup));
            !ok)
            return error(ok.error().message);

    const auto t0 = std::chrono::steady_clock::now();
    auto summary = run_jobs(std::move(jobs), ro);
    if (progress)
        progress->finish();
    if (!summary)
        return error(summary.error().message);
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto devices = report::device_stats(*summary);
    status.devices(devices);
    if (json_file)
        json.write_devices(devices);
    if (junit)
        junit->set_suite_properties(report::device_properties(devices));
    status.summary(wall_s, summary->stopped_by_signal,
                   opt.shard ? "shard " + std::to_string(opt.shard->k) + "/" + std::to_string(opt.shard->n) : "",
                   opt.json_path.empty() ? std::string() : cli::rerun_command(argc, argv, opt.json_path));

    // A report that could not be written in full fails the run: CI reads it.
    const bool reports_ok = cli::close_reports(json_file, json, opt.json_path, junit ? &*junit : nullptr,
                                               logs ? &*logs : nullptr, wall_s,
                                               [&status](const std::string& text) { status.note(text); });

    bool must_end = summary->stopped_by_signal != 0 || summary->timed_out;
    int status_code = reports_ok ? 0 : 1;
    for (const auto& r : summary->results)
        if ((r.status != JobStatus::passed && r.status != JobStatus::flaky) || r.output_lost != 0 || r.output_unkept != 0)
            status_code = 1;
    if (summary->timed_out)
        status_code = exit_run_timeout;
    if (summary->stopped_by_signal != 0) {
        status_code = 128 + summary->stopped_by_signal;
    } else if (const int sig = cli::stop_signal_now(signals, "all jobs ended; the reports are written"); sig != 0) {
        // Held until the reports were complete; now it decides the exit
        // status, and the output still queued for a slow reader is not waited for.
        status.note("stopped by " + signal_name(sig) + " after the last job ended; the reports are complete");
        status_code = 128 + sig;
        must_end = true;
    }
    return cli::finish_output(out, err, signals, must_end, status_code);
}

}  // namespace

int main(int argc, char** argv)
{
    // Before any descriptor is opened, which would take a closed one's number.
    const auto output_closed = cli::fill_closed_streams();
    if (!output_closed)
        return error(output_closed.error().message);
    // The jobs' output would have nowhere to go; a closed standard error
    // only discards the notices, as 2>/dev/null does.
    if (*output_closed)
        return error("standard output is closed: the jobs' output has nowhere to go (give >/dev/null to discard it)");
    // A step of --launcher slurm: before anything blocks a signal or ignores
    // SIGPIPE, since the job inherits both across the exec.
    if (argc >= 2 && std::string_view(argv[1]) == cli::step_mode_flag)
        return cli::run_step(argc, argv);
    // First of all: from here on no signal can kill pto-par half-way or be
    // lost; they are read where pto-par can act on them.
    auto signals = cli::EarlySignals::open();
    if (!signals) {
        std::cerr << "pto-par: error: " << signals.error().message << "\n";
        return exit_usage;
    }
    // A closed standard output must come back as EPIPE, not kill the run
    // and orphan its report; the jobs get SIGPIPE's default back.
    std::signal(SIGPIPE, SIG_IGN);
    // Likewise a file-size limit must come back as EFBIG from the write
    // that hit it, so the report can say so.
    std::signal(SIGXFSZ, SIG_IGN);
    // Descriptors are what each running job costs: all that may be had.
    cli::raise_descriptor_limit();
    try {
        return run(argc, argv, *signals);
    } catch (const std::exception& e) {
        std::cerr << "pto-par: internal error: " << e.what() << "\n";
        return 70;
    }
}
