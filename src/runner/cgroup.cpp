#include "runner/cgroup.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/read_file.hpp"
#include "runner/process_group.hpp"

namespace pto::runner {
namespace {

// No cgroup or /proc file this reads comes near this.
constexpr std::size_t max_small_file = 1 << 20;

Expected<std::string> read_small_file(const std::string& path)
{
    return read_file(path, max_small_file, path);
}

// mountinfo escapes blanks and backslashes in paths as \NNN (octal).
std::string unescape_mount_path(std::string_view s)
{
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 3 < s.size()) {
            const std::string oct(s.substr(i + 1, 3));
            char* end = nullptr;
            const long v = std::strtol(oct.c_str(), &end, 8);
            if (end == oct.c_str() + 3) {
                out += static_cast<char>(v);
                i += 3;
                continue;
            }
        }
        out += s[i];
    }
    return out;
}

// What `rest` holds up to the next `sep` (all of it if none); `rest` then
// starts after that `sep`.
std::string_view next_token(std::string_view& rest, char sep)
{
    const auto at = rest.find(sep);
    const std::string_view token = rest.substr(0, at);
    rest = at == std::string_view::npos ? std::string_view() : rest.substr(at + 1);
    return token;
}

// The mount point of the cgroup2 file system whose root is "/", from
// /proc/self/mountinfo (fields: id parent dev root mountpoint ... - fstype ...).
Expected<std::string> unified_mount()
{
    auto text = read_small_file("/proc/self/mountinfo");
    if (!text)
        return tl::unexpected(text.error());
    std::string_view rest = *text;
    while (!rest.empty()) {
        const std::string_view line = next_token(rest, '\n');
        const auto dash = line.find(" - ");
        if (dash == std::string_view::npos || line.substr(dash + 3).substr(0, 8) != "cgroup2 ")
            continue;
        std::string_view fields[5];
        std::string_view head = line.substr(0, dash);
        for (auto& f : fields)
            f = next_token(head, ' ');
        // A bind mount of a subtree (a container's view) has another root;
        // the path from /proc/self/cgroup is then relative to that root,
        // which only the namespace's own mount of "/" shows correctly.
        if (fields[3] == "/")
            return unescape_mount_path(fields[4]);
    }
    return fail("no cgroup v2 (unified) hierarchy is mounted");
}

bool write_text(int dir_fd, const char* file, std::string_view text)
{
    UniqueFd fd(openat(dir_fd, file, O_WRONLY | O_CLOEXEC));
    if (!fd)
        return false;
    return write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

bool populated_from(int events_fd)
{
    char buf[256];
    const ssize_t n = pread(events_fd, buf, sizeof buf - 1, 0);
    // Unreadable: assume something is still there, the safe answer for a
    // device that is about to be handed on.
    if (n <= 0)
        return true;
    buf[n] = '\0';
    const char* p = std::strstr(buf, "populated ");
    return p == nullptr || p[10] != '0';
}

std::vector<pid_t> pids_in(const std::string& dir)
{
    auto text = read_small_file(dir + "/cgroup.procs");
    return text ? parse_pids(*text) : std::vector<pid_t>{};
}

void kill_tree(const std::string& dir)
{
    UniqueFd dfd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dfd)
        return;
    if (write_text(dfd.get(), "cgroup.kill", "1"))
        return;
    // Before Linux 5.14 there is no cgroup.kill: signal each process, the
    // children's cgroups first.
    if (DIR* d = opendir(dir.c_str())) {
        while (const dirent* e = readdir(d))
            if (e->d_type == DT_DIR && e->d_name[0] != '.')
                kill_tree(dir + "/" + e->d_name);
        closedir(d);
    }
    for (pid_t pid : pids_in(dir))
        (void)kill(pid, SIGKILL);  // ESRCH: it exited meanwhile
}

// Waits up to `ms` for the cgroup at `dir` to empty, on its events file.
void wait_empty(const std::string& dir, int ms)
{
    UniqueFd ev(open((dir + "/cgroup.events").c_str(), O_RDONLY | O_CLOEXEC));
    if (!ev)
        return;
    for (int waited = 0; populated_from(ev.get()) && waited < ms; waited += 100) {
        pollfd p{ev.get(), POLLPRI, 0};
        (void)poll(&p, 1, 100);  // a timeout or EINTR only means: look again
    }
}

// rmdir of the leaves first; a cgroup with live processes stays (EBUSY).
void remove_tree(const std::string& dir)
{
    if (DIR* d = opendir(dir.c_str())) {
        while (const dirent* e = readdir(d))
            if (e->d_type == DT_DIR && e->d_name[0] != '.')
                remove_tree(dir + "/" + e->d_name);
        closedir(d);
    }
    (void)rmdir(dir.c_str());  // EBUSY: something could not be stopped; left for a later run
}

constexpr std::string_view run_prefix = "pto-par-";

}  // namespace

Expected<std::string> own_cgroup_dir()
{
    auto mount = unified_mount();
    if (!mount)
        return tl::unexpected(mount.error());
    auto text = read_small_file("/proc/self/cgroup");
    if (!text)
        return tl::unexpected(text.error());
    std::string_view rest = *text;
    while (!rest.empty()) {
        const std::string_view line = next_token(rest, '\n');
        if (line.substr(0, 3) != "0::")
            continue;
        std::string rel(line.substr(3));
        // "/.." style paths appear when our cgroup is outside the namespace's view.
        if (rel.find("/..") != std::string::npos || rel.find(" (deleted)") != std::string::npos)
            return fail("this process's cgroup (" + rel + ") is outside the visible hierarchy");
        std::string dir = *mount + (rel == "/" ? "" : rel);
        if (access(dir.c_str(), W_OK) != 0)
            return tl::unexpected(sys_error("cannot create cgroups in " + dir, errno));
        return dir;
    }
    return fail("this process is in no cgroup v2 (no 0:: line in /proc/self/cgroup)");
}

JobCgroup::~JobCgroup()
{
    if (path_.empty())
        return;
    if (events_ && populated()) {
        kill_all();
        wait_empty(path_, 1000);
    }
    (void)rmdir(path_.c_str());  // EBUSY: a process stuck in the kernel; a later run's clean-up tries again
}

bool JobCgroup::populated() const
{
    return populated_from(events_.get());
}

std::vector<pid_t> JobCgroup::pids() const
{
    return pids_in(path_);
}

void JobCgroup::signal_all(int sig) const
{
    for (pid_t pid : pids())
        (void)kill(pid, sig);  // ESRCH: gone meanwhile; EPERM cannot happen to root, who made the cgroup
}

void JobCgroup::kill_all() const
{
    killed_ = true;
    kill_tree(path_);
}

Expected<RunCgroup> RunCgroup::create()
{
    auto own = own_cgroup_dir();
    if (!own)
        return tl::unexpected(own.error());
    RunCgroup run;
    if (DIR* d = opendir(own->c_str())) {
        while (const dirent* e = readdir(d)) {
            const std::string_view name = e->d_name;
            if (e->d_type != DT_DIR || name.substr(0, run_prefix.size()) != run_prefix)
                continue;
            const std::string stale = *own + "/" + e->d_name;
            // Its run's lock free: that run is gone. Held (by its run, or by
            // another run cleaning it up now): leave it alone. Kept while
            // cleaning, so that two runs never clean one leftover at once.
            const UniqueFd lock(open(stale.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
            if (!lock || flock(lock.get(), LOCK_EX | LOCK_NB) != 0)
                continue;
            auto count = [&stale] {
                int n = 0;
                if (DIR* sd = opendir(stale.c_str())) {
                    while (const dirent* je = readdir(sd))
                        if (je->d_type == DT_DIR && je->d_name[0] != '.')
                            n += static_cast<int>(pids_in(stale + "/" + je->d_name).size());
                    closedir(sd);
                }
                return n;
            };
            run.stale_stopped_ += count();
            kill_tree(stale);
            wait_empty(stale, 2000);
            remove_tree(stale);
        }
        closedir(d);
    }
    const std::string base = *own + "/" + std::string(run_prefix) + std::to_string(getpid());
    for (int attempt = 0;; ++attempt) {
        const std::string path = attempt == 0 ? base : base + "-" + std::to_string(attempt);
        if (mkdir(path.c_str(), 0755) != 0) {
            // EEXIST: another run's (in another PID namespace, one with our
            // pid), or a leftover still being cleaned: never ours.
            if (errno == EEXIST && attempt < 100)
                continue;
            return tl::unexpected(sys_error("cannot create the run's cgroup " + path, errno));
        }
        UniqueFd lock(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!lock)
            return tl::unexpected(sys_error("cannot open the run's cgroup " + path, errno));
        // Between the mkdir and this lock another run starting may have
        // taken the new, empty cgroup for a dead run's: it then holds the
        // lock while it removes it, or has removed it already.
        struct stat held {}, named {};
        if (flock(lock.get(), LOCK_EX | LOCK_NB) != 0 || fstat(lock.get(), &held) != 0 ||
            stat(path.c_str(), &named) != 0 || held.st_ino != named.st_ino || held.st_dev != named.st_dev) {
            if (attempt < 100)
                continue;
            return fail("cannot hold the run's cgroup " + path + ": other runs keep removing it");
        }
        run.path_ = path;
        run.lock_ = std::move(lock);
        return run;
    }
}

RunCgroup::~RunCgroup()
{
    free_.clear();  // each removes its directory
    if (!path_.empty())
        remove_tree(path_);
}

void RunCgroup::recycle(JobCgroup job)
{
    // Enough for any -j that a machine runs; past it they are removed.
    constexpr std::size_t most_kept = 256;
    // Killed: a process born in it just after cgroup.kill is killed too
    // (seen on Linux 6.18), so it serves no other job.
    if (job.path_.empty() || !job.events_ || job.killed_ || job.populated() || free_.size() >= most_kept)
        return;
    job.close_start_fds();
    free_.push_back(std::move(job));
}

Expected<JobCgroup> RunCgroup::make_job(const std::string& name)
{
    JobCgroup job;
    if (!free_.empty()) {
        job = std::move(free_.back());
        free_.pop_back();
    } else {
        // Below the run's own cgroup nothing else makes cgroups; should a
        // name be taken all the same, it is another's, never adopted.
        for (int attempt = 0;; ++attempt) {
            job.path_ = path_ + "/" + name + (attempt == 0 ? "" : "-" + std::to_string(attempt));
            if (mkdir(job.path_.c_str(), 0755) == 0)
                break;
            const int err = errno;
            if (err == EEXIST && attempt < 100)
                continue;
            job.path_.clear();
            return tl::unexpected(sys_error("cannot create cgroup " + path_ + "/" + name, err));
        }
    }
    job.dir_ = UniqueFd(open(job.path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!job.dir_)
        return tl::unexpected(sys_error("cannot open " + job.path_, errno));
    if (!job.events_)
        job.events_ = UniqueFd(open((job.path_ + "/cgroup.events").c_str(), O_RDONLY | O_CLOEXEC));
    if (!job.events_)
        return tl::unexpected(sys_error("cannot open " + job.path_ + "/cgroup.events", errno));
    return job;
}

}  // namespace pto::runner
