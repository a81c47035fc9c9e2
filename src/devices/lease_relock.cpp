// A lease file or the lock directory removed while held, or another file
// renamed onto a lease's name: the name checked against the locked file, and
// what is gone made and locked again.
#include "devices/leases.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "devices/lease_files.hpp"

namespace pto::leases {

using files::make_shared_dir;
using files::open_to_all;
using files::watched_events;

bool LockDir::still_named(int fd, const std::string& key) const
{
    struct stat locked {};
    struct stat named {};
    if (fstat(fd, &locked) != 0)
        return true;  // cannot tell: as lock-file users do, trust the lock
    return fstatat(dir_.get(), key.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 && named.st_dev == locked.st_dev &&
           named.st_ino == locked.st_ino;
}

void LockDir::relock(const std::string& key, bool may_remake)
{
    UniqueFd fd(openat(dir_.get(), key.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666));
    // No file can be made in a removed directory; the watch on it says so
    // only once this run closes it, if at all.
    if (!fd && errno == ENOENT && may_remake) {
        (void)remake();  // which locks this one again too, or says why not
        return;
    }
    if (fd && flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
        open_to_all(fd.get());
        files::write_holder(fd.get());
        held_[key] = std::move(fd);  // the old descriptor's lock, on a file no one can open, goes
        return;
    }
    const std::string other = fd ? holder_in(fd.get()).text() : std::string();
    say("the lease file '" + path_ + "/" + key + "' was removed or replaced while this run held it" +
        (fd ? ", and another run" + (other.empty() ? std::string() : " (" + other + ")") +
                  " took it before it could be made again: both may use it now"
            : " and cannot be made again: other runs no longer see this lease") +
        "; do not remove lease files (their pids look stale, but the lock is what counts)");
}

bool LockDir::remake()
{
    struct stat now {};
    struct stat ours {};
    // Still there and still ours (a removal seen twice): nothing to do.
    if (stat(path_.c_str(), &now) == 0 && fstat(dir_.get(), &ours) == 0 && now.st_ino == ours.st_ino &&
        now.st_dev == ours.st_dev && ours.st_nlink > 0)
        return true;
    UniqueFd fresh;
    if (make_shared_dir(path_))
        fresh = UniqueFd(::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fresh || inotify_add_watch(inotify_.get(), path_.c_str(), watched_events) < 0) {
        say("the lock directory '" + path_ + "' was removed and cannot be made again: other runs no longer see "
            "this run's leases");
        return false;
    }
    dir_ = std::move(fresh);
    // Files of the old directory, which no other run can open any more.
    open_.clear();
    wanted_.clear();
    since_.clear();
    for (auto& [key, fd] : held_)
        relock(key, false);
    say("the lock directory '" + path_ + "' was removed while this run used it; it is made again and this run's "
        "leases taken again in it");
    return true;
}

}  // namespace pto::leases
