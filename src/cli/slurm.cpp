#include "cli/slurm.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include <pto/devices.hpp>

#include "cmdfile/commands_file.hpp"
#include "common/unique_fd.hpp"
#include "agent/step_agent.hpp"
#include "agent/step_gpu_variables.hpp"
#include "devices/discovery.hpp"
#include "runner/launcher.hpp"
#include "slurm/step_checks.hpp"

extern char** environ;

namespace pto::cli {
namespace {

// The standard output of `argv` (looked up in $PATH), with every signal
// unblocked in the child: pto-par blocks them from its first line.
Expected<std::string> capture(const std::vector<std::string>& argv)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return tl::unexpected(sys_error("pipe2", errno));
    UniqueFd read_end(fds[0]);
    UniqueFd write_end(fds[1]);
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    if (const int err = posix_spawn_file_actions_init(&actions); err != 0)
        return tl::unexpected(sys_error("posix_spawn_file_actions_init", err));
    if (const int err = posix_spawnattr_init(&attr); err != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return tl::unexpected(sys_error("posix_spawnattr_init", err));
    }
    sigset_t none;
    sigemptyset(&none);
    sigset_t all;
    sigfillset(&all);
    // Failures of these setters only come from bad arguments, which these are not.
    (void)posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
    (void)posix_spawnattr_setsigmask(&attr, &none);
    (void)posix_spawnattr_setsigdefault(&attr, &all);
    (void)posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    std::vector<char*> args;
    for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    const int err = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (err != 0)
        return tl::unexpected(sys_error("cannot run " + argv[0], err));
    write_end.reset();
    std::string out;
    char buf[4096];
    for (;;) {
        const ssize_t n = read(read_end.get(), buf, sizeof buf);
        if (n > 0) {
            out.append(buf, static_cast<std::size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        break;  // EOF, or a read error: the exit status below decides
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return tl::unexpected(sys_error("waitpid " + argv[0], errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return fail(argv[0] + " failed (see its message above)");
    return out;
}

std::string shell_quote(const std::string& s)
{
    if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,@+") ==
                          std::string::npos)
        return s;
    std::string q = "'";
    for (char c : s)
        q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

}  // namespace

Expected<std::vector<slurm::NodeDevices>> read_allocation(const char* job_id)
{
    auto text = capture({"scontrol", "show", "job", "-d", job_id});
    if (!text)
        return fail("cannot read Slurm job " + std::string(job_id) + ": " + text.error().message);
    auto nodes = slurm::parse_job_details(*text);
    if (!nodes)
        return fail("Slurm job " + std::string(job_id) + ": " + nodes.error().message);
    return nodes;
}

std::string salloc_hint(int argc, char** argv)
{
    std::string line = "salloc -N2 --ntasks-per-node=2 --gres=gpu:2";
    // Without -d: --launcher slurm rejects it, so the hint would not run.
    for (int i = 0; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "-d" || a == "--devices" || a == "--device") {
            ++i;
            continue;
        }
        if ((a.starts_with("-d") && !a.starts_with("--")) || a.starts_with("--devices=") || a.starts_with("--device="))
            continue;
        line += " " + shell_quote(argv[i]);
    }
    return line;
}

void forget_allocation_gpu_requests()
{
    // What the allocation asked for, which srun reads as the step's request
    // too: with SLURM_GPUS set, a step's --gres=gpu:N is "Invalid generic
    // resource (gres) specification". Each step says what it needs itself.
    for (const char* name : {"SLURM_GPUS", "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK", "SLURM_GPUS_PER_SOCKET",
                             "SLURM_CPUS_PER_GPU", "SLURM_MEM_PER_GPU", "SLURM_GPU_BIND", "SLURM_GPU_FREQ"})
        (void)unsetenv(name);  // fails only for a bad name, which these are not
}

std::vector<std::string> step_command(const std::string& self, double kill_grace_s, const std::string& shell,
                                      const std::string& command, const std::vector<std::string>& device_env,
                                      const StepCheck& check)
{
    const auto ms = [](double s) { return std::to_string(static_cast<long>(std::ceil(s * 1000))); };
    std::vector<std::string> argv{self, step_mode_flag};
    if (!check.command.empty())
        argv.insert(argv.end(), {std::string(step_check_flag), ms(check.timeout_s), check.command});
    argv.insert(argv.end(), {ms(kill_grace_s), shell, command});
    argv.insert(argv.end(), device_env.begin(), device_env.end());
    return argv;
}

namespace {

// A count of milliseconds from the agent's argv; -1 if it is none.
long milliseconds(const char* text)
{
    char* end = nullptr;
    const long ms = std::strtol(text, &end, 10);
    return end == text || *end != '\0' || ms < 0 ? -1 : ms;
}

}  // namespace

int run_step(int argc, char** argv)
{
    const auto misuse = [] {
        std::cerr << "pto-par: " << step_mode_flag << " is pto-par's own, for the steps of --launcher slurm\n";
        return 126;
    };
    // [pto-par, --slurm-step, (--check, TIMEOUT_MS, CHECK,) GRACE_MS, SHELL, COMMAND, NAME...]
    int at = 2;
    agent::Checks checks;
    const bool checked = argc > at && std::strcmp(argv[at], step_check_flag) == 0;
    if (checked) {
        if (argc < at + 3 || (checks.timeout_ms = milliseconds(argv[at + 1])) < 0)
            return misuse();
        checks.command = argv[at + 2];
        at += 3;
    }
    const long grace_ms = argc < at + 3 ? -1 : milliseconds(argv[at]);
    if (grace_ms < 0)
        return misuse();
    // Slurm's own word for the GPUs of this step; unset for --gres=none.
    const char* gpus = std::getenv("SLURM_STEP_GPUS");
    auto ids = parse_device_range(gpus != nullptr ? gpus : "");
    if (!ids) {
        std::cerr << "pto-par: SLURM_STEP_GPUS='" << gpus << "': " << ids.error().message << "\n";
        return 126;
    }
    if (checked) {
        // The run's word, for this step alone: not the job's to see.
        const char* trusted = std::getenv(slurm::trusted_gpus_variable);
        auto list = parse_device_range(trusted != nullptr ? trusted : "");
        if (!list) {
            std::cerr << "pto-par: " << slurm::trusted_gpus_variable << "='" << trusted << "': " << list.error().message
                      << "\n";
            return 126;
        }
        checks.trusted = std::move(*list);
        (void)unsetenv(slurm::trusted_gpus_variable);  // fails only for a bad name, which it is not
    }
    // As Slurm set them for the whole step, before a check narrows them.
    const agent::StepGpuVariables gpu_variables(*ids, [](const char* name) { return std::getenv(name); });
    const char* label = std::getenv("PTO_PAR_LABEL");
    const char* seq = std::getenv("PTO_PAR_SEQ");
    const std::vector<std::string> names(argv + at + 3, argv + argc);
    const auto prepare = [&](std::span<const int> gpu_ids, const std::string& text) -> Expected<std::string> {
        const std::string list = format_device_list(gpu_ids);
        const cmdfile::Placeholders values{format_device_range(gpu_ids), list, std::to_string(gpu_ids.size()),
                                           label != nullptr ? label : "", seq != nullptr ? seq : "", ""};
        std::string command = cmdfile::expand_placeholders(text, values);
        if (command.size() >= cmdfile::max_command_bytes)
            return fail("the command is " + std::to_string(command.size()) +
                        " bytes once its placeholders are replaced; the kernel takes at most " +
                        std::to_string(cmdfile::max_command_bytes - 1));
        const std::string count = std::to_string(gpu_ids.size());
        // setenv fails only for lack of memory or a bad name; -e names were checked.
        bool ok = setenv("PTO_PAR_DEVICES", list.c_str(), 1) == 0 &&
                  setenv("PTO_PAR_NUM_DEVICES", count.c_str(), 1) == 0 &&
                  setenv(device_names_variable, "", 1) == 0 && setenv(device_variable_variable, "", 1) == 0;
        // Slurm's own first: a -e name the user gave wins.
        for (const auto& [name, value] : gpu_variables.for_gpus(gpu_ids))
            ok = ok && setenv(name.c_str(), value.c_str(), 1) == 0;
        for (const auto& name : names)
            ok = ok && setenv(name.c_str(), list.c_str(), 1) == 0;
        if (!ok)
            return tl::unexpected(sys_error("setenv", errno));
        return command;
    };
    const auto env = [](const char* name) {
        const char* v = std::getenv(name);
        return std::string(v != nullptr ? v : "");
    };
    agent::Step step;
    step.shell = argv[at + 1];
    step.command = argv[at + 2];
    step.id = env("SLURM_JOB_ID") + "." + env("SLURM_STEP_ID");
    // One frame, so that nothing of the job can come before it.
    step.header = std::string(slurm::step_header_marker) + step.id + " " + env("SLURMD_NODENAME") + " " +
                  env("SLURM_STEP_GPUS") + "\n";
    step.gpus = std::move(*ids);
    step.grace_ms = grace_ms;
    step.checks = checked ? &checks : nullptr;
    step.prepare = prepare;
    return agent::run_step(step);
}

Expected<SlurmSetup> slurm_setup(const Options& opt, int argc, char** argv)
{
    const char* job_id = std::getenv("SLURM_JOB_ID");
    if (job_id == nullptr || *job_id == '\0')
        return fail("--launcher slurm runs inside a Slurm allocation ($SLURM_JOB_ID is not set); for example:\n  " +
                    cli::salloc_hint(argc, argv));
    if (opt.devices != "auto")
        return fail("--launcher slurm takes its devices from the allocation: leave out -d");
    cli::forget_allocation_gpu_requests();
    SlurmSetup s;
    // Found now, not by every job's srun failing with "command not found".
    const char* search = std::getenv("PATH");
    for (const std::string& program : {s.options.srun, s.options.scancel, s.options.squeue})
        if (!runner::resolve_program(program, search != nullptr ? search : ""))
            return fail("--launcher slurm needs Slurm's " + program + ", which is not on $PATH");
    auto nodes = cli::read_allocation(job_id);
    if (!nodes)
        return tl::unexpected(nodes.error());
    s.nodes = std::move(*nodes);
    s.job_id = job_id;
    for (const auto& n : s.nodes) {
        s.options.nodes.push_back({n.name, n.ids.size(), n.cpus});
        s.devices += n.ids.size();
    }
    char path[4096];
    const ssize_t len = readlink("/proc/self/exe", path, sizeof path - 1);
    if (len <= 0)
        return tl::unexpected(sys_error("readlink /proc/self/exe (each step runs this binary)", errno));
    s.self.assign(path, static_cast<std::size_t>(len));
    return s;
}

std::string describe_nodes(const std::vector<slurm::NodeDevices>& nodes)
{
    std::string out;
    for (const auto& n : nodes)
        out += (out.empty() ? "" : ", ") + n.name + ":" + (n.ids.empty() ? "none" : format_device_range(n.ids));
    return out;
}
}  // namespace pto::cli
