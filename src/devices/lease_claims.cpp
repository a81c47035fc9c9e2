// Claims: a waiting run's "want-KEY@SINCE" files, by which runs take
// turns at a lease (the oldest claim first), the patience after which
// an idle run leaves nothing to others, and the second look at a lease
// found held.
#include "devices/leases.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <memory>

namespace pto::leases {
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

void LockDir::arm_patience(bool from_now)
{
    const auto now = std::chrono::steady_clock::now();
    const auto left = std::max(std::chrono::steady_clock::duration::zero(),
                               (from_now ? now : since_at_) + patience - now);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    itimerspec when{};
    // A zero it_value disarms: at least a nanosecond.
    when.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
    when.it_value.tv_nsec = static_cast<long>(std::max<long long>(ns % 1000000000, ns == 0 ? 1 : 0));
    (void)timerfd_settime(timer_.get(), 0, &when, nullptr);  // cannot fail with these values
}

void LockDir::arm_second_look()
{
    static_assert(second_look < std::chrono::seconds(1), "it_value.tv_nsec holds all of it");
    itimerspec when{};
    when.it_value.tv_nsec = std::chrono::duration_cast<std::chrono::nanoseconds>(second_look).count();
    (void)timerfd_settime(second_look_.get(), 0, &when, nullptr);  // cannot fail with these values
}

bool LockDir::in_second_look() const
{
    // The look's pass follows its wake at once; a try later than a look's
    // span (another job's end, when the look came while the run could
    // start nothing) is a try of its own.
    return looked_at_ != std::chrono::steady_clock::time_point{} &&
           std::chrono::steady_clock::now() - looked_at_ < second_look;
}

}  // namespace pto::leases
