#include "devices/leases.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>

#include "devices/lease_files.hpp"

namespace pto::leases {
namespace {

using files::fallback_lock_dir;
using files::make_shared_dir;
using files::open_to_all;
using files::watched_events;

Expected<LockDir> open_at(const std::string& dir, auto make)
{
    if (auto ok = make_shared_dir(dir); !ok)
        return tl::unexpected(ok.error());
    return make(dir);
}

}  // namespace

Expected<LockDir> LockDir::open(const std::string& dir)
{
    const auto make = [](const std::string& path) -> Expected<LockDir> {
        LockDir d;
        d.path_ = path;
        d.dir_ = UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!d.dir_)
            return tl::unexpected(sys_error("cannot open lock directory '" + path + "'", errno));
        // A file per lease is made in it: a directory this user cannot
        // write to is no place for leases (said now, not at the first job).
        if (faccessat(d.dir_.get(), ".", W_OK | X_OK, AT_EACCESS) != 0)
            return tl::unexpected(sys_error("cannot use lock directory '" + path + "'", errno));
        d.inotify_ = UniqueFd(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
        if (!d.inotify_)
            return tl::unexpected(sys_error("inotify_init1 (to learn when another run gives a lease back)", errno));
        if (inotify_add_watch(d.inotify_.get(), path.c_str(), watched_events) < 0)
            return tl::unexpected(sys_error("inotify_add_watch '" + path + "'", errno));
        d.timer_ = UniqueFd(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
        if (!d.timer_)
            return tl::unexpected(sys_error("timerfd_create (to end a wait that is left to other runs)", errno));
        d.second_look_ = UniqueFd(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
        if (!d.second_look_)
            return tl::unexpected(sys_error("timerfd_create (to look again at a lease found held)", errno));
        d.poll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
        if (!d.poll_)
            return tl::unexpected(sys_error("epoll_create1 (for the lock directory's events)", errno));
        for (const int fd : {d.inotify_.get(), d.timer_.get(), d.second_look_.get()}) {
            epoll_event ev{};
            ev.events = EPOLLIN;
            ev.data.fd = fd;
            if (epoll_ctl(d.poll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
                return tl::unexpected(sys_error("epoll_ctl (for the lock directory's events)", errno));
        }
        return d;
    };
    if (!dir.empty())
        return open_at(dir, make);
    auto d = open_at(default_lock_dir, make);
    if (d)
        return d;
    // /run/lock missing or not ours to write (not root, a container):
    // the temporary directory, which other runs of this machine share too.
    auto fallback = open_at(fallback_lock_dir(), make);
    if (!fallback)
        return fail(d.error().message + "; and " + fallback.error().message);
    return fallback;
}

void LockDir::inherit(std::vector<std::string> keys)
{
    for (auto& k : keys)
        inherited_.insert(std::move(k));
}

Expected<int> LockDir::file_for(const std::string& key)
{
    if (const auto it = open_.find(key); it != open_.end())
        return it->second.get();
    // Read-write: a holder's close is then IN_CLOSE_WRITE, the one event
    // watched; 0666 and fchmod so that another user's run can lease it too.
    UniqueFd fd(openat(dir_.get(), key.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666));
    if (!fd)
        return tl::unexpected(sys_error("cannot open lease '" + path_ + "/" + key + "'", errno));
    open_to_all(fd.get());
    const int raw = fd.get();
    open_.emplace(key, std::move(fd));
    return raw;
}

Expected<std::variant<std::vector<Lease>, Busy>> LockDir::try_take(std::span<const std::string> keys, bool idle)
{
    std::vector<Lease> taken;
    taken.reserve(keys.size());
    // All or none: what was taken before a busy one is unlocked, not
    // closed, so that giving it back is no event to wake this run again
    // (a close would be, and the same attempt would fail for ever).
    const auto give_back = [this, &taken] {
        for (auto& lease : taken)
            if (!lease.inherited()) {
                auto node = held_.extract(lease.key_);
                // Cannot fail on a lock we hold; were it to, closing the
                // descriptor below gives the lock back all the same.
                (void)flock(node.mapped().get(), LOCK_UN);
                open_.insert(std::move(node));
                lease.dir_ = nullptr;
            }
    };
    // Past its patience an idle run leaves nothing to others; before it,
    // what runs that waited first wait for, found in one look.
    const bool patient =
        !idle || since_.empty() || std::chrono::steady_clock::now() - since_at_ < patience;
    std::vector<std::string> unclaimed;
    for (const auto& key : keys)
        if (inherited_.count(key) == 0 && wanted_.count(key) == 0)
            unclaimed.push_back(key);
    const auto first = patient && !unclaimed.empty() ? claimed_first(unclaimed) : std::set<std::string, std::less<>>();
    for (const auto& key : keys) {
        if (inherited_.count(key) != 0) {
            taken.emplace_back(key, nullptr);
            continue;
        }
        if (first.count(key) != 0) {
            give_back();
            // Waited for in turn: this run's claim, after the earlier one's.
            want(key);
            if (idle)
                arm_patience();
            return Busy{key, {}, true};
        }
        // A file removed or replaced between its open and its lock guards
        // nothing: locked again under its name (a few times: a cleaner that
        // keeps removing it gets an error), a removed directory made again.
        Expected<int> fd = -1;
        for (int tries = 0;; ++tries) {
            fd = file_for(key);
            if (!fd && fd.error().sys_errno == ENOENT && tries < 3 && remake())
                continue;
            if (!fd) {
                give_back();
                failed_key_ = key;
                return tl::unexpected(fd.error());
            }
            if (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
                const int err = errno;
                give_back();
                failed_key_ = key;
                if (err != EWOULDBLOCK)
                    return tl::unexpected(sys_error("flock '" + path_ + "/" + key + "'", err));
                want(key);
                // Its holder's close wakes this run. A try's instant hold
                // ends with no close: one more look soon, after each try but
                // the look's own. Should a wake be missed all the same, an
                // idle run still looks again in a while, so that it never
                // waits for ever (SPEC 10).
                if (!in_second_look())
                    arm_second_look();
                else if (idle)
                    arm_patience(true);
                return Busy{key, holder_in(*fd)};
            }
            if (still_named(*fd, key))
                break;
            open_.erase(key);
            if (tries == 3) {
                give_back();
                failed_key_ = key;
                return fail("lease '" + path_ + "/" + key + "' is removed as soon as it is made");
            }
        }
        files::write_holder(*fd);
        held_.insert(open_.extract(key));
        taken.emplace_back(key, this);
    }
    // Waiting no more: closing the claims (opened for writing) wakes the
    // runs that left these leases to this one.
    clear_claims();
    return taken;
}

Lease::~Lease()
{
    if (dir_ != nullptr)
        dir_->held_.erase(key_);  // the close gives the lease back
}

Lease& Lease::operator=(Lease&& other) noexcept
{
    if (this != &other) {
        if (dir_ != nullptr)
            dir_->held_.erase(key_);
        key_ = std::move(other.key_);
        dir_ = std::exchange(other.dir_, nullptr);
    }
    return *this;
}

short LockDir::poll_events() const
{
    return POLLIN;
}

bool LockDir::drain()
{
    alignas(inotify_event) char buf[4096];
    std::uint64_t expired = 0;
    // Patience over: the next try leaves nothing to others. EAGAIN: not yet.
    bool freed = read(timer_.get(), &expired, sizeof expired) == static_cast<ssize_t>(sizeof expired);
    if (read(second_look_.get(), &expired, sizeof expired) == static_cast<ssize_t>(sizeof expired)) {
        freed = true;
        looked_at_ = std::chrono::steady_clock::now();
    }
    for (;;) {
        const ssize_t n = read(inotify_.get(), buf, sizeof buf);
        if (n <= 0)
            return freed;  // EAGAIN: all read; another error: nothing more to read either
        bool gone = false;
        for (ssize_t at = 0; at < n;) {
            const auto* ev = reinterpret_cast<const inotify_event*>(buf + at);
            if ((ev->mask & (IN_CLOSE_WRITE | IN_Q_OVERFLOW)) != 0) {
                freed = true;
                looked_at_ = {};  // a try for this event: a lease held in it gets its second look
            }
            // Its name removed, or another file renamed onto it (mv, sed -i):
            // the name no longer leads to the file this run locked.
            if ((ev->mask & (IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)) != 0 && ev->len > 0)
                if (const auto it = held_.find(std::string_view(ev->name));
                    it != held_.end() && !still_named(it->second.get(), it->first))
                    relock(it->first);
            // The directory itself, or a lost event that may have been that.
            if ((ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_Q_OVERFLOW)) != 0)
                gone = true;
            at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
        }
        if (gone && remake()) {
            freed = true;  // what this run waited for may be free in the new one
            looked_at_ = {};
        }
    }
}

void LockDir::on_ready(short)
{
    if (drain() && on_freed_)
        on_freed_();
}

}  // namespace pto::leases
