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
                held.push_back({key, holder_in(fd.get())});
        }
    }
    return held;
}

std::string Holder::text() const
{
    if (pid == 0)
        return {};
    return "pid " + std::to_string(pid) + (elsewhere ? " in another PID namespace" : "");
}

// "PID NS\n" (files::write_holder); a file of an older run has no NS.
Holder LockDir::holder_in(int fd)
{
    char buf[64];
    const ssize_t n = pread(fd, buf, sizeof buf, 0);
    Holder holder;
    if (n <= 0)
        return holder;
    const char* end = buf + n;
    const auto pid = std::from_chars(buf, end, holder.pid);
    unsigned long long ns = 0;
    if (pid.ec == std::errc() && pid.ptr < end && *pid.ptr == ' ' &&
        std::from_chars(pid.ptr + 1, end, ns).ec == std::errc()) {
        const auto own = files::pid_namespace();
        holder.elsewhere = own != 0 && ns != own;
    }
    return holder;
}

Expected<Holder> LockDir::last_holder(const std::string& key)
{
    if (const auto it = open_.find(key); it != open_.end())
        return holder_in(it->second.get());
    // Read-only and unlocked: closing it is no event, and no probe of the
    // lock can make another run's try fail unseen.
    UniqueFd fd(openat(dir_.get(), key.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd)
        return errno == ENOENT ? Expected<Holder>(Holder{})
                               : tl::unexpected(sys_error("cannot open lease '" + path_ + "/" + key + "'", errno));
    return holder_in(fd.get());
}

}  // namespace pto::leases
