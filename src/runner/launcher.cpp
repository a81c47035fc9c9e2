#include "runner/launcher.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <optional>

#include "runner/direct_exec.hpp"

namespace pto::runner {
namespace {

// What the child needs, prepared in full by the parent: between vfork and
// execve the child may only make system calls. It reports a failure by
// writing err/step, which the parent reads once vfork returns (the memory is
// shared until execve or _exit).
struct ChildPlan {
    const char* path;
    char* const* argv;
    char* const* envp;
    // When `path` is a line's program run without its shell: the shell
    // line itself, run if that execve fails.
    const char* fallback_path;
    char* const* fallback_argv;
    char* const* fallback_envp;
    const char* cwd;
    int dev_null;
    int out_fd;
    const sigset_t* mask;
    pid_t parent;
    volatile int err;
    const char* volatile step;
};

// Signals the run handles or ignores; a job must start with their defaults
// whatever the caller had, or Ctrl-C or a closed pipe would not reach it.
constexpr std::array reset_signals{SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE, SIGXFSZ};

[[noreturn]] void child_fail(ChildPlan* plan, const char* step)
{
    plan->err = errno;
    plan->step = step;
    _exit(127);
}

[[noreturn]] void exec_child(ChildPlan* plan)
{
    if (setpgid(0, 0) != 0)
        child_fail(plan, "setpgid");
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        child_fail(plan, "prctl(PR_SET_PDEATHSIG)");
    // The parent may have died before the line above took effect; then no
    // signal will ever come, so leave now instead of running unsupervised.
    if (getppid() != plan->parent)
        _exit(127);
    if (dup2(plan->dev_null, STDIN_FILENO) < 0 || dup2(plan->out_fd, STDOUT_FILENO) < 0 ||
        dup2(plan->out_fd, STDERR_FILENO) < 0)
        child_fail(plan, "dup2");
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : reset_signals)
        if (sigaction(sig, &dfl, nullptr) != 0)
            child_fail(plan, "sigaction");
    if (sigprocmask(SIG_SETMASK, plan->mask, nullptr) != 0)
        child_fail(plan, "sigprocmask");
    if (plan->cwd != nullptr && chdir(plan->cwd) != 0)
        child_fail(plan, "chdir");
    execve(plan->path, plan->argv, plan->envp);
    // A script without #! (ENOEXEC), a file we may not run (EACCES)...: the
    // shell handles those its own way and in its own words.
    if (plan->fallback_path != nullptr)
        execve(plan->fallback_path, plan->fallback_argv, plan->fallback_envp);
    child_fail(plan, "execve");
}

bool is_executable_file(const std::string& path)
{
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

std::vector<char*> pointers(const std::vector<std::string>& words)
{
    std::vector<char*> out;
    out.reserve(words.size() + 1);
    for (const auto& w : words)
        out.push_back(const_cast<char*>(w.c_str()));  // execve's signature, never written
    out.push_back(nullptr);
    return out;
}

// `/bin/sh -c LINE` as dash would run it when LINE is one plain command:
// its words, the program dash's PATH search finds, dash's environment.
struct DirectExec {
    std::string path;
    std::vector<std::string> words;
    std::vector<char*> argv;
    std::vector<char*> envp;
};

std::optional<DirectExec> direct_form(const LaunchSpec& spec, const Environment& env)
{
    // Only the shell that is modelled, exactly as the CLI runs a line, in
    // our own directory (whose PWD the model computed).
    if (spec.argv.size() != 3 || spec.argv[0] != "/bin/sh" || spec.argv[1] != "-c" || !spec.cwd.empty())
        return std::nullopt;
    const auto search = env.sh_path_for(spec.env);
    if (!search)
        return std::nullopt;
    auto words = plain_command_words(spec.argv[2]);
    if (!words)
        return std::nullopt;
    // Not found: the shell says so ("sh: 1: x: not found") and exits 127.
    auto path = resolve_program(words->front(), *search);
    if (!path)
        return std::nullopt;
    DirectExec d{std::move(*path), std::move(*words), {}, env.sh_block(spec.env)};
    d.argv = pointers(d.words);
    return d;
}

}  // namespace

Expected<std::string> resolve_program(const std::string& name, std::string_view path_var)
{
    if (name.empty())
        return fail("empty program name");
    if (name.find('/') != std::string::npos)
        return name;
    std::size_t start = 0;
    while (start <= path_var.size()) {
        auto end = path_var.find(':', start);
        if (end == std::string_view::npos)
            end = path_var.size();
        std::string dir(path_var.substr(start, end - start));
        start = end + 1;
        std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
        if (is_executable_file(candidate))
            return candidate;
    }
    return fail(name + ": command not found in PATH", ENOENT);
}

Expected<Child> launch(const LaunchSpec& spec, const LaunchContext& ctx)
{
    if (spec.argv.empty())
        return fail("empty command line");
    auto path = resolve_program(spec.argv[0], ctx.env->path());
    if (!path)
        return tl::unexpected(path.error());

    const std::vector<char*> argv = pointers(spec.argv);
    const std::vector<char*> envp = ctx.env->block(spec.env);
    const auto direct = direct_form(spec, *ctx.env);

    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return tl::unexpected(sys_error("pipe2", errno));
    UniqueFd read_end(fds[0]);
    UniqueFd write_end(fds[1]);
    const int flags = fcntl(read_end.get(), F_GETFL);
    if (flags < 0 || fcntl(read_end.get(), F_SETFL, flags | O_NONBLOCK) != 0)
        return tl::unexpected(sys_error("fcntl(O_NONBLOCK)", errno));

    ChildPlan plan{path->c_str(), argv.data(), envp.data(), nullptr, nullptr, nullptr,
                   spec.cwd.empty() ? nullptr : spec.cwd.c_str(), ctx.dev_null, write_end.get(), ctx.child_mask,
                   getpid(), 0, nullptr};
    if (direct) {
        plan.fallback_path = plan.path;
        plan.fallback_argv = plan.argv;
        plan.fallback_envp = plan.envp;
        plan.path = direct->path.c_str();
        plan.argv = direct->argv.data();
        plan.envp = direct->envp.data();
    }
    // vfork rather than posix_spawn: spawn cannot set PR_SET_PDEATHSIG, and
    // vfork keeps spawn's cost (no page-table copy) in a large process.
    const pid_t pid = vfork();
    if (pid == 0)
        exec_child(&plan);
    if (pid < 0)
        return tl::unexpected(sys_error("vfork", errno));
    write_end.reset();

    if (plan.err != 0) {
        const int err = plan.err;
        const std::string step = plan.step;
        // The child has already _exit()ed; reap it so no zombie is left.
        while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
        }
        return tl::unexpected(sys_error(step + " " + *path, err));
    }
    return Child{pid, std::move(read_end), direct.has_value()};
}

}  // namespace pto::runner
