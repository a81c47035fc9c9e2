#include "runner/guardian.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

namespace pto::runner {
namespace {

// What the guardian does runs in a forked child of a process that may have
// threads (a program embedding the library): system calls only, on memory
// prepared before the fork.
struct Plan {
    int socket;  // the guardian's end
    pid_t* groups;       // table of running jobs' process groups; 0 = a free slot
    std::size_t slots;
    const char* cgroup;  // the run's cgroup directory, "" under process groups
};

void remember(const Plan& p, pid_t value)
{
    if (value > 0) {
        for (std::size_t i = 0; i < p.slots; ++i)
            if (p.groups[i] == 0) {
                p.groups[i] = value;
                return;
            }
        return;  // more than announced at once: cgroup.kill still takes it, a group may be missed
    }
    for (std::size_t i = 0; i < p.slots; ++i)
        if (p.groups[i] == -value) {
            p.groups[i] = 0;
            return;
        }
}

// rmdir of the cgroups below `dir` (one level: the jobs'), then of `dir`;
// getdents64 because opendir allocates.
void remove_cgroups(const char* dir)
{
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;  // gone already: the run removed it
    alignas(8) char buf[4096];
    for (;;) {
        const long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (long at = 0; at < n;) {
            struct Entry {
                unsigned long long ino;
                long long off;
                unsigned short reclen;
                unsigned char type;
                char name[1];
            };
            const auto* e = reinterpret_cast<const Entry*>(buf + at);
            if (e->type == DT_DIR && e->name[0] != '.')
                (void)unlinkat(fd, e->name, AT_REMOVEDIR);  // EBUSY: a process stuck in the kernel
            at += e->reclen;
        }
    }
    (void)close(fd);  // read-only
    (void)rmdir(dir);  // EBUSY: as above; the next run beside it cleans it up
}

// Its name and command line say what it is, so that `pgrep -x pto-par` or
// `pkill -f tests.cmds` finds the run, not its guardian (which ignores the
// signals they send). The command line is the memory argv[0] begins
// (program_invocation_name), as long as /proc/self/cmdline says; a
// program that moved argv[0] keeps its command line.
void name_guardian()
{
    (void)prctl(PR_SET_NAME, "pto-par-guard");  // cannot fail for a valid pointer
    char title[48] = "pto-par-guard of pid ";
    std::size_t used = std::strlen(title);
    char digits[24];
    std::size_t n = 0;
    for (auto pid = static_cast<unsigned long>(getppid()); n == 0 || pid != 0; pid /= 10)
        digits[n++] = static_cast<char>('0' + pid % 10);
    while (n > 0)
        title[used++] = digits[--n];
    title[used] = '\0';
    char* area = program_invocation_name;
    const int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || area == nullptr) {
        if (fd >= 0)
            (void)close(fd);  // read-only
        return;
    }
    char first[256];
    std::size_t length = 0;
    bool same_start = false;
    for (;;) {
        const ssize_t got = read(fd, length == 0 ? first : digits, length == 0 ? sizeof first : sizeof digits);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        if (length == 0) {
            const std::size_t argv0 = strnlen(first, static_cast<std::size_t>(got));
            same_start = argv0 < static_cast<std::size_t>(got) && std::memcmp(first, area, argv0 + 1) == 0;
        }
        length += static_cast<std::size_t>(got);
    }
    (void)close(fd);  // read-only
    if (!same_start || length < 2)
        return;
    std::memset(area, 0, length);
    std::memcpy(area, title, std::min(used, length - 1));
}

[[noreturn]] void guard(const Plan& p)
{
    pid_t values[256];
    for (;;) {
        const ssize_t n = read(p.socket, values, sizeof values);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;  // EOF: the run is over
        for (ssize_t i = 0; i < n / static_cast<ssize_t>(sizeof(pid_t)); ++i)
            remember(p, values[i]);
    }
    // Each group still running: its id is still in use by its members, so
    // it names them and no other process.
    for (std::size_t i = 0; i < p.slots; ++i)
        if (p.groups[i] > 0)
            (void)kill(-p.groups[i], SIGKILL);  // ESRCH: it ended unannounced, which is fine
    if (p.cgroup[0] != '\0') {
        char path[4096];
        const std::size_t len = std::strlen(p.cgroup);
        if (len + 32 < sizeof path) {
            std::memcpy(path, p.cgroup, len);
            std::memcpy(path + len, "/cgroup.kill", 13);
            const int kill_fd = open(path, O_WRONLY | O_CLOEXEC);
            if (kill_fd >= 0) {
                (void)!write(kill_fd, "1", 1);  // no cgroup.kill before Linux 5.14: the groups above were all
                (void)close(kill_fd);           // written to: its only error is the write's
            }
            std::memcpy(path + len, "/cgroup.events", 15);
            const int events = open(path, O_RDONLY | O_CLOEXEC);
            // Empty within 2 s, or removing it fails (EBUSY) and is left to
            // the next run: nothing waits for ever.
            for (int waited = 0; events >= 0 && waited < 2000; waited += 50) {
                char buf[256];
                const ssize_t r = pread(events, buf, sizeof buf - 1, 0);
                if (r <= 0)
                    break;
                buf[r] = '\0';
                if (std::strstr(buf, "populated 0") != nullptr)
                    break;
                pollfd pfd{events, POLLPRI, 0};
                (void)poll(&pfd, 1, 50);  // a timeout only means: look again
            }
            if (events >= 0)
                (void)close(events);  // read-only
        }
        remove_cgroups(p.cgroup);
    }
    _exit(0);
}

}  // namespace

Expected<Guardian> Guardian::start(const std::string& run_cgroup, std::size_t most_jobs)
{
    Guardian g;
    g.cgroup_ = run_cgroup;
    g.slots_ = most_jobs == 0 ? 1 : most_jobs;
    g.running_.reserve(g.slots_);
    if (auto ok = g.launch(); !ok)
        return tl::unexpected(ok.error());
    return g;
}

// A socket rather than a pipe: a message to a guardian that died is EPIPE
// with MSG_NOSIGNAL, where a pipe would raise SIGPIPE in a program that
// embeds the runner and keeps its default.
Expected<void> Guardian::launch()
{
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
        return tl::unexpected(sys_error("socketpair (for the guardian)", errno));
    UniqueFd read_end(fds[0]);
    UniqueFd write_end(fds[1]);
    // Room for a burst of starts while the guardian is not scheduled; the
    // kernel caps it (net.core.wmem_max), which is no error.
    const int room = 1 << 20;
    (void)setsockopt(write_end.get(), SOL_SOCKET, SO_SNDBUF, &room, sizeof room);
    if (fcntl(write_end.get(), F_SETFL, O_NONBLOCK) != 0)
        return tl::unexpected(sys_error("fcntl O_NONBLOCK (for the guardian)", errno));
    std::vector<pid_t> table(slots_, 0);
    const Plan plan{read_end.get(), table.data(), table.size(), cgroup_.c_str()};
    const pid_t pid = fork();
    if (pid < 0)
        return tl::unexpected(sys_error("fork (the guardian)", errno));
    if (pid == 0) {
        // Its own session: Ctrl-C at the terminal and a signal to pto-par's
        // group do not reach it; it ends with its socket. Every signal is
        // blocked (the run's stop signals are caught, not blocked, there);
        // SIGKILL still ends it.
        (void)setsid();  // fails only for a group leader, which a fresh child is not
        sigset_t all;
        sigfillset(&all);
        (void)sigprocmask(SIG_BLOCK, &all, nullptr);  // cannot fail with a valid set
        const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int std_fd = 0; std_fd < 3; ++std_fd)
            if (null_fd >= 0)
                (void)dup2(null_fd, std_fd);  // keep no reader of pto-par's output waiting for EOF
        // Nothing else of the run's: in particular no pipe of a job, whose
        // reader would otherwise never see its end, nor the run's end of
        // the socket. The run's cgroup lock goes too; until the guardian is
        // done, its cgroups are not empty.
        const auto close_from = [](unsigned first, unsigned last) {
            if (first > last)
                return;
            if (syscall(SYS_close_range, first, last, 0) == 0)
                return;
            // Before Linux 5.9: one by one, up to the descriptor limit.
            const long most = sysconf(_SC_OPEN_MAX);
            for (long fd = first; fd <= last && fd < (most > 0 ? most : 65536); ++fd)
                (void)close(static_cast<int>(fd));  // EBADF for most: not open
        };
        close_from(3, static_cast<unsigned>(plan.socket) - 1);
        close_from(static_cast<unsigned>(plan.socket) + 1, ~0U);
        name_guardian();
        guard(plan);
    }
    pid_ = pid;
    socket_ = std::move(write_end);
    return {};
}

Guardian::Guardian(Guardian&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)), socket_(std::move(o.socket_)), cgroup_(std::move(o.cgroup_)),
      slots_(o.slots_), running_(std::move(o.running_)), say_(std::move(o.say_))
{
}

Guardian::~Guardian()
{
    if (pid_ < 0)
        return;
    socket_.reset();
    // It exits as soon as it has read the end; a run's own reaper may have
    // reaped it already (ECHILD).
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
}

void Guardian::job_started(pid_t pgid)
{
    running_.push_back(pgid);
    tell(pgid);
}

void Guardian::job_ended(pid_t pgid)
{
    if (const auto it = std::find(running_.begin(), running_.end(), pgid); it != running_.end()) {
        *it = running_.back();
        running_.pop_back();
    }
    tell(-pgid);
}

void Guardian::tell(pid_t value)
{
    // A full socket (the guardian stopped, its buffer of starts unread)
    // loses this one message; cgroup.kill still covers that job. EPIPE: it
    // died, which the poll reports (on_ready).
    (void)send(socket_.get(), &value, sizeof value, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void Guardian::on_ready(short)
{
    const pid_t lost = pid_;
    // The run's reaper takes the dead one (a child of this process).
    socket_.reset();
    pid_ = -1;
    std::string said = "the guardian, pid " + std::to_string(lost) + ", died (killed?)";
    if (auto ok = launch(); !ok) {
        said += "; no other could be started (" + ok.error().message +
                "): should pto-par be killed now, its jobs go on running";
    } else {
        for (const pid_t pgid : running_)
            tell(pgid);
        said += "; pid " + std::to_string(pid_) + " took its place for the " + std::to_string(running_.size()) +
                " running job" + (running_.size() == 1 ? "" : "s");
    }
    if (say_)
        say_(said);
}

}  // namespace pto::runner
