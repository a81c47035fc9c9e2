#include "common/replaced_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <string_view>
#include <utility>

namespace pto {

namespace {

bool all_digits(std::string_view s)
{
    return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// The pid in ".BASE.PID.tmp" or ".BASE.PID-N.tmp", the names open() gives;
// 0 for any other name.
pid_t temporary_pid(std::string_view name, const std::string& base)
{
    const std::string prefix = "." + base + ".";
    constexpr std::string_view suffix = ".tmp";
    if (name.size() <= prefix.size() + suffix.size() || name.substr(0, prefix.size()) != prefix ||
        name.substr(name.size() - suffix.size()) != suffix)
        return 0;
    std::string_view middle = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (const auto dash = middle.find('-'); dash != std::string_view::npos) {
        if (!all_digits(middle.substr(dash + 1)))
            return 0;
        middle = middle.substr(0, dash);
    }
    // Ten digits at most: any pid_t fits, and the sum cannot overflow.
    if (!all_digits(middle) || middle.size() > 10)
        return 0;
    long long pid = 0;
    for (const char c : middle)
        pid = pid * 10 + (c - '0');
    return pid > 0 && pid <= 0x7fffffff ? static_cast<pid_t>(pid) : 0;
}

// A run killed by SIGKILL cannot remove its temporary: the next run with
// the same report does. Only a dead pid's, and only if no one holds its
// lock: a run in another PID namespace looks dead from here but holds it.
// Best effort throughout: a leftover is untidy, never in the report's way.
void remove_stale_temporaries(const std::string& dir, const std::string& base)
{
    DIR* d = opendir(dir.empty() ? "." : dir.c_str());
    if (d == nullptr)
        return;
    const int dfd = dirfd(d);
    while (const dirent* e = readdir(d)) {
        const pid_t pid = temporary_pid(e->d_name, base);
        // EPERM is another user's live process: theirs to clean.
        if (pid == 0 || kill(pid, 0) == 0 || errno != ESRCH)
            continue;
        // Not a symlink's target, and no wait on a FIFO with that name.
        const int fd = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            (void)unlinkat(dfd, e->d_name, 0);
        (void)::close(fd);
    }
    (void)closedir(d);
}

}  // namespace

ReplacedFile::ReplacedFile(ReplacedFile&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), what_(std::move(o.what_)), path_(std::move(o.path_)),
      temp_path_(std::exchange(o.temp_path_, {})), final_path_(std::move(o.final_path_))
{
}

ReplacedFile& ReplacedFile::operator=(ReplacedFile&& o) noexcept
{
    if (this != &o) {
        discard();
        fd_ = std::exchange(o.fd_, -1);
        what_ = std::move(o.what_);
        path_ = std::move(o.path_);
        temp_path_ = std::exchange(o.temp_path_, {});
        final_path_ = std::move(o.final_path_);
    }
    return *this;
}

ReplacedFile::~ReplacedFile()
{
    discard();
}

void ReplacedFile::discard()
{
    // Only on failure paths: the file is abandoned, so close's error is moot.
    if (fd_ >= 0)
        (void)::close(fd_);
    fd_ = -1;
    // Best effort: a leftover hidden temporary is untidy, not harmful.
    if (!temp_path_.empty())
        (void)unlink(temp_path_.c_str());
    temp_path_.clear();
}

Expected<ReplacedFile> ReplacedFile::open(const std::string& path, const std::string& what)
{
    ReplacedFile f;
    f.what_ = what;
    f.path_ = path;
    const auto cannot = [&](const char* verb, int err) {
        return tl::unexpected(sys_error(std::string(verb) + " " + what + " '" + path + "'", err));
    };

    struct stat st{};
    const bool exists = stat(path.c_str(), &st) == 0;
    const int stat_errno = exists ? 0 : errno;
    const bool special_dir = path.rfind("/dev/", 0) == 0 || path.rfind("/proc/", 0) == 0;
    if (exists && (!S_ISREG(st.st_mode) || special_dir)) {
        // /dev/stdout, a FIFO: renaming over those would replace the device
        // node or the pipe's name (as root, even in /dev), not feed it; and
        // /dev/stdout may well lead to a regular file that pto-par's own
        // standard output is writing to: append, after the jobs' output,
        // rather than truncate it.
        f.fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
        if (f.fd_ < 0)
            return cannot("cannot open", errno);
        return f;
    }
    if (exists) {
        // An existing report: follow a symlink to it, so that it keeps
        // pointing at the new one instead of being replaced by it.
        char* real = realpath(path.c_str(), nullptr);
        if (real == nullptr)
            return cannot("cannot resolve", errno);
        f.final_path_ = real;
        std::free(real);
    } else if (stat_errno == ENOENT) {
        f.final_path_ = path;
    } else {
        return cannot("cannot use", stat_errno);
    }
    const auto slash = f.final_path_.rfind('/');
    const std::string dir = slash == std::string::npos ? "" : f.final_path_.substr(0, slash + 1);
    const std::string base = slash == std::string::npos ? f.final_path_ : f.final_path_.substr(slash + 1);
    remove_stale_temporaries(dir, base);
    // Hidden and not ending in the report's extension, so that a CI glob
    // for reports skips it; pid and attempt make it ours alone (O_EXCL).
    for (int attempt = 0;; ++attempt) {
        std::string name = dir + "." + base + "." + std::to_string(getpid());
        if (attempt > 0)
            name += "-" + std::to_string(attempt);
        name += ".tmp";
        f.fd_ = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (f.fd_ >= 0) {
            // Tells other runs it is live (see remove_stale_temporaries);
            // without flock (some network file systems) it is only left
            // behind when this run is killed, as before.
            (void)flock(f.fd_, LOCK_EX | LOCK_NB);
            f.temp_path_ = std::move(name);
            return f;
        }
        if (errno != EEXIST || attempt == 100)
            return cannot("cannot create", errno);
    }
}

Expected<void> ReplacedFile::commit()
{
    const auto failed = [this](int err) {
        discard();
        return tl::unexpected(sys_error("cannot write " + what_ + " '" + path_ + "'", err));
    };
    if (fd_ < 0)
        return fail(what_ + " '" + path_ + "' is not open");
    // On disk before it takes the file's name, so that a crash cannot
    // leave an empty file where the last good report was. (In place, on a
    // device or a pipe, there is nothing to make durable.)
    if (!temp_path_.empty() && fsync(fd_) != 0)
        return failed(errno);
    // Delayed write-back errors (NFS, a full thin volume) surface at close.
    if (::close(std::exchange(fd_, -1)) != 0)
        return failed(errno);
    if (temp_path_.empty())
        return {};
    if (rename(temp_path_.c_str(), final_path_.c_str()) != 0)
        return failed(errno);
    temp_path_.clear();
    return {};
}

}  // namespace pto
