#include "devices/leases.hpp"

#include <fcntl.h>
#include <poll.h>
#include <dirent.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>

#include "devices/port_pool.hpp"

namespace pto::leases {
namespace {

// A holder's close (a lease or a claim given back), and what removes this
// run's files or the directory under it.
constexpr std::uint32_t watched_events =
    IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF;

// A directory every user's runs can lease in: made sticky and writable by
// all (as /tmp), whatever the umask; an existing one is used as it is.
Expected<void> make_shared_dir(const std::string& dir)
{
    if (mkdir(dir.c_str(), 01777) == 0) {
        if (chmod(dir.c_str(), 01777) != 0)
            return tl::unexpected(sys_error("chmod 1777 '" + dir + "'", errno));
        return {};
    }
    if (errno == EEXIST)
        return {};
    return tl::unexpected(sys_error("cannot create lock directory '" + dir + "'", errno));
}

// Where leases go when /run/lock cannot be used.
std::string fallback_lock_dir()
{
    const char* tmp = std::getenv("TMPDIR");
    return std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/pto-par-locks";
}

// A file of the lock directory this user made: 0666, so that another
// user's run can use it too. Best effort: a file another user made keeps
// its mode, which they chose.
void open_to_all(int fd)
{
    struct stat st {};
    if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 0666) != 0666)
        (void)fchmod(fd, 0666);
}

Expected<LockDir> open_at(const std::string& dir, auto make)
{
    if (auto ok = make_shared_dir(dir); !ok)
        return tl::unexpected(ok.error());
    return make(dir);
}

}  // namespace

Expected<std::optional<std::string>> choose_lock_dir(const std::optional<std::string>& option, const char* env)
{
    std::string value;
    if (option) {
        if (option->empty())
            return fail("--lock-dir needs a directory, or 'none' for no leases across runs");
        value = *option;
    } else if (env != nullptr) {
        if (*env == '\0')
            return fail(std::string("$") + lock_dir_variable + " is set but empty: unset it, or name a directory or 'none'");
        value = env;
    }
    if (value == "none")
        return std::optional<std::string>();
    return std::optional<std::string>(value);
}

std::string device_key(std::string_view identity)
{
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string key = "device-";
    for (const char c : identity) {
        const auto u = static_cast<unsigned char>(c);
        const bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                          c == '_' || c == '-';
        if (keep) {
            key += c;
        } else {
            key += '%';
            key += hex[u >> 4];
            key += hex[u & 15];
        }
    }
    return key;
}

std::string port_key(int port)
{
    return "port-" + std::to_string(port);
}

Inherited inherited_from(const std::function<const char*(const char*)>& getenv_fn)
{
    Inherited got;
    if (getenv_fn("PTO_PAR_SEQ") == nullptr)
        return got;
    const char* names = getenv_fn("PTO_PAR_DEVICE_NAMES");
    const char* devices = names != nullptr && *names != '\0' ? names : getenv_fn("PTO_PAR_DEVICES");
    for (std::string_view rest = devices != nullptr ? devices : ""; !rest.empty();) {
        const auto comma = rest.find(',');
        if (const auto entry = rest.substr(0, comma); !entry.empty())
            got.devices.emplace_back(entry);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    // "LOW-HIGH" as the outer run writes it; anything else inherits no port.
    if (const char* ports = getenv_fn("PTO_PAR_PORTS"); ports != nullptr)
        if (const auto range = parse_port_range(ports))
            for (int p = range->first; p <= range->second; ++p)
                got.ports.push_back(p);
    return got;
}

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
        d.poll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
        if (!d.poll_)
            return tl::unexpected(sys_error("epoll_create1 (for the lock directory's events)", errno));
        for (const int fd : {d.inotify_.get(), d.timer_.get()}) {
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
            return Busy{key, 0, true};
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
                return Busy{key, pid_in(*fd)};
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
        // The pid for Busy and last_holder: written in place, at once, of
        // one width (zeros in front), so that it needs no truncation: ext4
        // writes a file truncated to nothing and written again out to disk
        // when it is closed (auto_da_alloc), which made each job of W1 wait
        // about 3 ms. Only that answer is lost if it cannot be written (a
        // full disk): the lease is held all the same.
        char pid[16];
        const int n = std::snprintf(pid, sizeof pid, "%010d\n", static_cast<int>(getpid()));
        (void)!pwrite(*fd, pid, static_cast<std::size_t>(n), 0);
        held_.insert(open_.extract(key));
        taken.emplace_back(key, this);
    }
    // Waiting no more: closing the claims (opened for writing) wakes the
    // runs that left these leases to this one.
    clear_claims();
    return taken;
}

namespace {

// "want-KEY@SINCE": the key and when its claimant began to wait; false
// for any other name.
bool parse_claim(std::string_view name, std::string_view& key, std::string_view& since)
{
    if (!name.starts_with("want-"))
        return false;
    const auto at = name.find('@');
    if (at == std::string_view::npos)
        return false;
    key = name.substr(5, at - 5);
    since = name.substr(at + 1);
    return !since.empty();
}

}  // namespace

std::set<std::string, std::less<>> LockDir::claimed_first(std::span<const std::string> keys)
{
    std::set<std::string, std::less<>> claimed;
    // Its own descriptor: a directory stream reads from the offset of the
    // descriptor it is given, which dir_ shares with nobody only this way.
    const int fd = openat(dir_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return claimed;  // nothing seen is left to anyone: fair no more, never stuck
    const std::unique_ptr<DIR, int (*)(DIR*)> d(fdopendir(fd), closedir);
    if (!d) {
        (void)close(fd);
        return claimed;
    }
    while (const dirent* e = readdir(d.get())) {
        std::string_view key;
        std::string_view since;
        if (!parse_claim(e->d_name, key, since) || since == since_ || (!since_.empty() && since > since_))
            continue;
        if (std::find(keys.begin(), keys.end(), key) == keys.end() || claimed.count(key) != 0)
            continue;
        // Locked while its run waits; a claim this look can lock is a dead
        // run's (named only once locked, and never named again): removed.
        const UniqueFd claim(openat(dir_.get(), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
        if (!claim)
            continue;
        if (flock(claim.get(), LOCK_SH | LOCK_NB) == 0) {
            (void)unlinkat(dir_.get(), e->d_name, 0);  // another user's stays: the next look skips it again
            continue;
        }
        if (errno == EWOULDBLOCK)
            claimed.emplace(key);
    }
    return claimed;
}

void LockDir::want(const std::string& key)
{
    if (wanted_.count(key) != 0)
        return;
    if (since_.empty()) {
        timespec now{};
        (void)clock_gettime(CLOCK_REALTIME, &now);  // cannot fail with this clock
        std::uint32_t nonce = 0;
        // Only a tie-break beside the time and the pid: a short read leaves zeros.
        (void)!getrandom(&nonce, sizeof nonce, GRND_NONBLOCK);
        char buf[64];
        std::snprintf(buf, sizeof buf, "%020lld.%010d.%08x",
                      static_cast<long long>(now.tv_sec) * 1000000000LL + now.tv_nsec, static_cast<int>(getpid()),
                      static_cast<unsigned>(nonce));
        since_ = buf;
        since_at_ = std::chrono::steady_clock::now();
    }
    // Locked under a name no one looks for, then named: a claim another run
    // can lock is never a live one.
    const std::string name = "want-" + key + "@" + since_;
    const std::string draft = "draft-" + key + "@" + since_;
    UniqueFd fd(openat(dir_.get(), draft.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644));
    // Without it this run waits all the same, only not in its turn.
    if (!fd)
        return;
    // Readable by all: another user's run must open it to see it is live.
    (void)fchmod(fd.get(), 0644);
    if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0 || renameat(dir_.get(), draft.c_str(), dir_.get(), name.c_str()) != 0) {
        (void)unlinkat(dir_.get(), draft.c_str(), 0);
        return;
    }
    wanted_.emplace(key, std::move(fd));
}

void LockDir::clear_claims()
{
    for (auto& [key, fd] : wanted_) {
        // Closed while named, so that the close is seen (IN_CLOSE_WRITE),
        // then removed; a look in between finds it unlocked and may remove
        // it first.
        fd.reset();
        (void)unlinkat(dir_.get(), ("want-" + key + "@" + since_).c_str(), 0);
    }
    wanted_.clear();
    since_.clear();
    // Nothing to be patient for.
    const itimerspec off{};
    (void)timerfd_settime(timer_.get(), 0, &off, nullptr);
}

void LockDir::arm_patience()
{
    const auto left = std::max(std::chrono::steady_clock::duration::zero(),
                               since_at_ + patience - std::chrono::steady_clock::now());
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    itimerspec when{};
    // A zero it_value disarms: at least a nanosecond.
    when.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
    when.it_value.tv_nsec = static_cast<long>(std::max<long long>(ns % 1000000000, ns == 0 ? 1 : 0));
    (void)timerfd_settime(timer_.get(), 0, &when, nullptr);  // cannot fail with these values
}

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
        char pid[16];
        const int n = std::snprintf(pid, sizeof pid, "%010d\n", static_cast<int>(getpid()));
        (void)!pwrite(fd.get(), pid, static_cast<std::size_t>(n), 0);  // as in try_take
        held_[key] = std::move(fd);  // the old descriptor's lock, on a file no one can open, goes
        return;
    }
    const pid_t other = fd ? pid_in(fd.get()) : 0;
    say("the lease file '" + path_ + "/" + key + "' was removed while this run held it" +
        (fd ? ", and another run" + (other != 0 ? " (pid " + std::to_string(other) + ")" : std::string()) +
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

std::vector<Busy> LockDir::held_now(const std::string& dir, std::span<const std::string> keys)
{
    std::vector<std::string> places;
    if (!dir.empty()) {
        places.push_back(dir);
    } else {
        // Where open() would have a run lease: either, as each run finds.
        places = {default_lock_dir, fallback_lock_dir()};
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
    for (;;) {
        const ssize_t n = read(inotify_.get(), buf, sizeof buf);
        if (n <= 0)
            return freed;  // EAGAIN: all read; another error: nothing more to read either
        bool gone = false;
        for (ssize_t at = 0; at < n;) {
            const auto* ev = reinterpret_cast<const inotify_event*>(buf + at);
            if ((ev->mask & (IN_CLOSE_WRITE | IN_Q_OVERFLOW)) != 0)
                freed = true;
            if ((ev->mask & (IN_DELETE | IN_MOVED_FROM)) != 0 && ev->len > 0)
                if (const auto it = held_.find(std::string_view(ev->name)); it != held_.end())
                    relock(it->first);
            // The directory itself, or a lost event that may have been that.
            if ((ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_Q_OVERFLOW)) != 0)
                gone = true;
            at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
        }
        if (gone && remake())
            freed = true;  // what this run waited for may be free in the new one
    }
}

void LockDir::on_ready(short)
{
    if (drain() && on_freed_)
        on_freed_();
}

}  // namespace pto::leases
