#include "common/replaced_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <utility>

namespace pto {

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
    // Hidden and not ending in the report's extension, so that a CI glob
    // for reports skips it; pid and attempt make it ours alone (O_EXCL).
    for (int attempt = 0;; ++attempt) {
        std::string name = dir + "." + base + "." + std::to_string(getpid());
        if (attempt > 0)
            name += "-" + std::to_string(attempt);
        name += ".tmp";
        f.fd_ = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (f.fd_ >= 0) {
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
