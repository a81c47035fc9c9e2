#include "runner/launcher.hpp"

#include <fcntl.h>
#include <signal.h>
#include <linux/sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>

namespace pto::runner {
namespace {

// What the child needs, prepared in full by the parent: between vfork and
// execve the child may only make system calls.
struct ExecFailure {
    int err;
    char step[52];
};

struct ChildPlan {
    const char* path;
    char* const* argv;
    char* const* envp;
    const char* cwd;
    int dev_null;
    int out_fd;
    int cgroup_procs;  // -1, or where the child writes its pid to join a cgroup
    int report_fd;  // close-on-exec: EOF at execve, or the failure written; -1: report_memory
    ExecFailure* report_memory;  // memory the parent sees, and reads once the child has exec'd or exited
    pid_t parent;
};

// Signals a job must start with at their defaults whatever this process does
// with them: ignored ones are inherited across execve, and Ctrl-C, a closed
// pipe or a file-size limit must reach the job as they would reach any program.
constexpr std::array reset_always{SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE, SIGXFSZ};

// After vfork the failure goes through a pipe rather than the memory vfork
// shares: where vfork is a fork (qemu-user), shared memory would never reach
// the parent, which would not wait for the exec either. clone3 with
// CLONE_VFORK is what it says wherever it exists, and writes to memory:
// two descriptors fewer for each job at its start.
[[noreturn]] void child_fail(const ChildPlan* plan, const char* step)
{
    ExecFailure f{errno, {}};
    std::strncpy(f.step, step, sizeof f.step - 1);
    if (plan->report_memory != nullptr)
        *plan->report_memory = f;
    else
        (void)!write(plan->report_fd, &f, sizeof f);  // failed: the parent still sees exit 127, with no reason
    _exit(127);
}

[[noreturn]] void exec_child(const ChildPlan* plan)
{
    // Every signal is blocked here (the parent blocked them all around
    // vfork), so no handler of the caller can run on the shared stack and
    // heap; caught ones go back to their defaults before anything is unblocked.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
        struct sigaction old {};
        if (sigaction(sig, nullptr, &old) != 0)
            continue;  // EINVAL: no such signal, or one that cannot be caught
        if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)
            (void)sigaction(sig, &dfl, nullptr);  // only fails for SIGKILL/SIGSTOP, never caught
    }
    for (int sig : reset_always)
        if (sigaction(sig, &dfl, nullptr) != 0)
            child_fail(plan, "sigaction");
    // Its own process group, so that Ctrl-C at the terminal reaches pto-par
    // alone, which stops the jobs in order; and no controlling terminal, so
    // a job that opens /dev/tty fails instead of stopping on SIGTTIN for
    // ever. TIOCNOTTY drops the terminal for this process and what it
    // starts; setsid() would too, but makes every job a scheduling group of
    // its own (autogroup), which tripled the cost of starting a short job.
    if (setpgid(0, 0) != 0)
        child_fail(plan, "setpgid");
    if (const int tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC); tty >= 0) {
        if (ioctl(tty, TIOCNOTTY) != 0)
            child_fail(plan, "ioctl(TIOCNOTTY)");
        (void)close(tty);  // read-only use: nothing to lose
    }
    if (plan->cgroup_procs >= 0 && write(plan->cgroup_procs, "0", 1) != 1)
        child_fail(plan, "joining its cgroup");
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        child_fail(plan, "prctl(PR_SET_PDEATHSIG)");
    // The parent may have died before the line above took effect; then no
    // signal will ever come, so leave now instead of running unsupervised.
    if (getppid() != plan->parent)
        _exit(127);
    if (dup2(plan->dev_null, STDIN_FILENO) < 0 || dup2(plan->out_fd, STDOUT_FILENO) < 0 ||
        dup2(plan->out_fd, STDERR_FILENO) < 0)
        child_fail(plan, "dup2");
    if (plan->cwd != nullptr && chdir(plan->cwd) != 0)
        child_fail(plan, "chdir");
    sigset_t none;
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, nullptr) != 0)
        child_fail(plan, "sigprocmask");
    execve(plan->path, plan->argv, plan->envp);
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

Expected<void> set_nonblocking(int fd)
{
    const int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
        return tl::unexpected(sys_error("fcntl(O_NONBLOCK)", errno));
    return {};
}

// Blocks every signal for its lifetime: the vfork child runs on this
// thread's stack until it execs.
class AllSignalsBlocked {
public:
    AllSignalsBlocked()
    {
        sigset_t all;
        sigfillset(&all);
        // Cannot fail: the set and the `how` are valid.
        (void)pthread_sigmask(SIG_SETMASK, &all, &saved_);
    }
    ~AllSignalsBlocked() { (void)pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
    AllSignalsBlocked(const AllSignalsBlocked&) = delete;
    AllSignalsBlocked& operator=(const AllSignalsBlocked&) = delete;

private:
    sigset_t saved_{};
};

// A child born in the cgroup at `cgroup_dir` (clone3 with CLONE_INTO_CGROUP,
// Linux 5.7): moving a running process there instead, by writing to
// cgroup.procs, waits for an RCU grace period (some 4 ms here) with this
// process suspended in vfork.
//
// Where there is an assembly stub for it (clone_vfork_*.S), the child is
// made as vfork makes one, CLONE_VM | CLONE_VFORK, but on a stack of its
// own: the child can then neither return into this frame nor need one, and
// nothing of this process is copied. Without it (other CPUs, and under
// AddressSanitizer, whose shadow of a stack the child would poison behind
// its back) the child has a copy of this process, as after fork, which
// costs the copy of the page tables and the faults that follow; either
// way it makes only system calls.
//
// -1 with *err ENOSYS or EINVAL where the kernel (or qemu-user) has no such
// clone3: the caller falls back to vfork and cgroup.procs.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PTO_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define PTO_UNDER_ASAN 1
#endif
#if (defined(__x86_64__) || defined(__aarch64__)) && !defined(PTO_UNDER_ASAN)
#define PTO_CLONE_VFORK 1
extern "C" long pto_clone3_vfork(clone_args* args, std::size_t size, void (*fn)(const void*), const void* arg);

[[noreturn]] void child_entry(const void* plan)
{
    exec_child(static_cast<const ChildPlan*>(plan));
}

// What exec_child needs below its frame: a few system calls' worth.
constexpr std::size_t child_stack_size = 32 * 1024;
#endif

[[gnu::noinline]] pid_t start_child_in_cgroup(const ChildPlan* plan, int cgroup_dir, int* err)
{
    const AllSignalsBlocked blocked;
    clone_args args{};
    args.flags = CLONE_INTO_CGROUP;
    args.exit_signal = SIGCHLD;
    args.cgroup = static_cast<std::uint64_t>(cgroup_dir);
#ifdef PTO_CLONE_VFORK
    // Ours until the child has exec'd or exited: this thread waits till then.
    alignas(16) std::array<char, child_stack_size> stack;
    args.flags |= CLONE_VM | CLONE_VFORK;
    args.stack = reinterpret_cast<std::uintptr_t>(stack.data());
    args.stack_size = stack.size();
    const long pid = pto_clone3_vfork(&args, sizeof args, child_entry, plan);
    if (pid < 0) {
        *err = static_cast<int>(-pid);
        return -1;
    }
    return static_cast<pid_t>(pid);
#else
    // The child is a copy, as after fork; CLONE_VFORK still holds this
    // thread until it has exec'd or exited, so that its report is there.
    args.flags |= CLONE_VFORK;
    const long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0)
        exec_child(plan);
    *err = errno;  // before the mask is restored
    return static_cast<pid_t>(pid);
#endif
}

// Where a child born by clone3 reports a failed exec: memory this process
// sees. With CLONE_VM that is any of its own; a child that is a copy writes
// to a shared page, one per thread, mapped at the first launch (nullptr if
// that fails: the caller then takes the path with a pipe).
ExecFailure* clone3_report(ExecFailure* own)
{
#ifdef PTO_CLONE_VFORK
    return own;
#else
    (void)own;
    static thread_local ExecFailure* shared = [] {
        void* p = mmap(nullptr, sizeof(ExecFailure), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? nullptr : static_cast<ExecFailure*>(p);
    }();
    return shared;
#endif
}

// Kept apart from launch() so that no local of a caller lives across the
// vfork (whose child borrows this stack frame).
[[gnu::noinline]] pid_t start_child(const ChildPlan* plan, int* err)
{
    const AllSignalsBlocked blocked;
    // vfork rather than posix_spawn: spawn cannot make a session leader
    // with PR_SET_PDEATHSIG that joins a cgroup; vfork keeps spawn's cost
    // (no page-table copy) in a large process.
    const pid_t pid = vfork();
    if (pid == 0)
        exec_child(plan);
    *err = errno;  // before the mask is restored
    return pid;
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

bool can_start_in_cgroup()
{
    // A descriptor that cannot be open: EBADF where the call and the flag
    // exist, ENOSYS or EINVAL where they do not; no process is made.
    clone_args args{};
    args.flags = CLONE_INTO_CGROUP;
    args.exit_signal = SIGCHLD;
    args.cgroup = INT_MAX;
    return syscall(SYS_clone3, &args, sizeof args) < 0 && errno == EBADF;
}

Expected<Child> launch(const LaunchSpec& spec, const LaunchContext& ctx, int cgroup_dir)
{
    if (spec.argv.empty())
        return fail("empty command line");
    auto path = resolve_program(spec.argv[0], ctx.env->path());
    if (!path)
        return tl::unexpected(path.error());

    const std::vector<char*> argv = pointers(spec.argv);
    const std::vector<char*> envp = ctx.env->block(spec.env);

    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return tl::unexpected(sys_error("pipe2", errno));
    UniqueFd read_end(fds[0]);
    UniqueFd write_end(fds[1]);
    if (auto ok = set_nonblocking(read_end.get()); !ok)
        return tl::unexpected(ok.error());

    ChildPlan plan{path->c_str(), argv.data(), envp.data(), spec.cwd.empty() ? nullptr : spec.cwd.c_str(),
                   ctx.dev_null, write_end.get(), -1, -1, nullptr, getpid()};
    int start_errno = 0;
    pid_t pid = -1;
    ExecFailure own{};
    if (ExecFailure* report = cgroup_dir >= 0 ? clone3_report(&own) : nullptr) {
        *report = ExecFailure{};
        plan.report_memory = report;
        pid = start_child_in_cgroup(&plan, cgroup_dir, &start_errno);  // born in the cgroup
        if (pid < 0 && start_errno != ENOSYS && start_errno != EINVAL && start_errno != E2BIG)
            return tl::unexpected(sys_error("clone3", start_errno));
        if (pid >= 0) {
            if (report->step[0] == '\0')
                return Child{pid, std::move(read_end)};
            const ExecFailure f = *report;
            // The child has _exit()ed; reap it so no zombie is left.
            while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
            }
            return tl::unexpected(sys_error(std::string(f.step) + " " + *path, f.err));
        }
        plan.report_memory = nullptr;
    }
    // vfork: its child joins the cgroup itself, through cgroup.procs.
    UniqueFd procs;
    if (cgroup_dir >= 0) {
        procs = UniqueFd(openat(cgroup_dir, "cgroup.procs", O_WRONLY | O_CLOEXEC));
        if (!procs)
            return tl::unexpected(sys_error("cannot open cgroup.procs of the job's cgroup", errno));
        plan.cgroup_procs = procs.get();
    }
    if (pipe2(fds, O_CLOEXEC) != 0)
        return tl::unexpected(sys_error("pipe2", errno));
    UniqueFd report_read(fds[0]);
    UniqueFd report_write(fds[1]);
    plan.report_fd = report_write.get();
    pid = start_child(&plan, &start_errno);
    if (pid < 0)
        return tl::unexpected(sys_error("vfork", start_errno));
    write_end.reset();
    report_write.reset();

    ExecFailure f{};
    ssize_t n = 0;
    do
        n = read(report_read.get(), &f, sizeof f);
    while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(sizeof f)) {
        // The child has _exit()ed or is about to; reap it so no zombie is left.
        while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
        }
        f.step[sizeof f.step - 1] = '\0';
        return tl::unexpected(sys_error(std::string(f.step) + " " + *path, f.err));
    }
    return Child{pid, std::move(read_end)};
}

}  // namespace pto::runner
