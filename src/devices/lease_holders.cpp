// Who holds a lease: the pids in lease files, as other runs read them.
#include "devices/leases.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "devices/lease_files.hpp"

namespace pto::leases {

std::vector<Busy> LockDir::held_now(const std::string& dir, std::span<const std::string> keys)
{
    std::vector<std::string> places;
    if (!dir.empty()) {
        places.push_back(dir);
    } else {
        // Where open() would have a run lease: either, as each run finds.
        places = {default_lock_dir, files::fallback_lock_dir()};
    }
    std::vector<Busy> held;
    for (const auto& place : places) {
        const UniqueFd d(::open(place.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!d)
            continue;  // not there (or not ours to read): no lease of it to see
        for (const auto& key : keys) {
            // A file that cannot be opened is no lease this run could take
            // either; it says so when it tries.
            const UniqueFd fd(openat(d.get(), key.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
            if (!fd)
                continue;
            if (flock(fd.get(), LOCK_SH | LOCK_NB) == 0) {
                (void)flock(fd.get(), LOCK_UN);  // and the close gives it back anyway
                continue;
            }
            if (errno == EWOULDBLOCK)
                held.push_back({key, pid_in(fd.get())});
        }
    }
    return held;
}

pid_t LockDir::pid_in(int fd)
{
    char buf[32];
    const ssize_t n = pread(fd, buf, sizeof buf, 0);
    pid_t pid = 0;
    if (n > 0)
        std::from_chars(buf, buf + n, pid);
    return pid;
}

Expected<pid_t> LockDir::last_holder(const std::string& key)
{
    if (const auto it = open_.find(key); it != open_.end())
        return pid_in(it->second.get());
    // Read-only and unlocked: closing it is no event, and no probe of the
    // lock can make another run's try fail unseen.
    UniqueFd fd(openat(dir_.get(), key.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd)
        return errno == ENOENT ? Expected<pid_t>(0)
                               : tl::unexpected(sys_error("cannot open lease '" + path_ + "/" + key + "'", errno));
    return pid_in(fd.get());
}

}  // namespace pto::leases
