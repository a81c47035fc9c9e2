// Leases across runs (SPEC 10): two pto-par runs on one machine never hold
// the same device or port at once. A lease is an flock(2) on a file per
// device (named by its identity on the machine: the entry a job gets in its
// device variable, a UUID staying a UUID) and per port, in a lock
// directory; the kernel gives it back when its holder closes it or dies.
// No daemon: waiting is an inotify watch on the directory in the run's one
// poll (LockDir is a PollClient); its timers are one-shot looks again for
// what makes no event, never a polling interval.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <pto/error.hpp>
#include <pto/scheduler.hpp>

#include "common/unique_fd.hpp"

namespace pto::leases {

inline constexpr const char* default_lock_dir = "/run/lock/pto-par";
inline constexpr const char* lock_dir_variable = "PTO_PAR_LOCK_DIR";

// Where the run's leases live: --lock-dir's value, else $PTO_PAR_LOCK_DIR's,
// else the default (an empty result). "none" turns leases off: nullopt.
// An empty value of either is an error naming it.
Expected<std::optional<std::string>> choose_lock_dir(const std::optional<std::string>& option, const char* env);

// The file names of leases: "device-<identity>", "port-<N>", with any byte
// outside [A-Za-z0-9._-] written %XX, so that every identity is one name.
std::string device_key(std::string_view identity);
std::string port_key(int port);

// Inside a job of a run ($PTO_PAR_SEQ set): what that run leased for the
// job, which a run started in it uses without waiting. Its devices by
// identity ($PTO_PAR_DEVICE_NAMES, else the numbers of $PTO_PAR_DEVICES:
// what the outer run leased them by) and its ports ($PTO_PAR_PORTS).
// Nothing outside a job.
struct Inherited {
    std::vector<std::string> devices;
    std::vector<int> ports;
};
Inherited inherited_from(const std::function<const char*(const char*)>& getenv_fn);

class LockDir;

// A lease held; given back when destroyed. An inherited one (a nested run's,
// held by the outer run for this run's job) holds nothing. Its descriptor
// is its LockDir's, which must outlive it and not move while it is held:
// the LockDir takes a lease again when its file is removed.
class Lease {
    friend class LockDir;

public:
    Lease(std::string key, LockDir* dir) : key_(std::move(key)), dir_(dir) {}
    ~Lease();
    Lease(Lease&& other) noexcept : key_(std::move(other.key_)), dir_(std::exchange(other.dir_, nullptr)) {}
    Lease& operator=(Lease&& other) noexcept;
    const std::string& key() const { return key_; }
    bool inherited() const { return dir_ == nullptr; }

private:
    std::string key_;
    LockDir* dir_;
};

// Who holds a lease, as its file says: the pid it wrote (0 when not known;
// for an instant after taking it, the pid of the holder before), and
// whether it wrote it in another PID namespace, where that number names
// no process of ours (a run in a container is often pid 1 there).
struct Holder {
    pid_t pid = 0;
    bool elsewhere = false;
    // "pid 4242", "pid 1 in another PID namespace"; empty when not known.
    std::string text() const;
};

// Held by another run, `holder`. Or `yielded`: free, but another run waits
// for it, and has it first.
struct Busy {
    std::string key;
    Holder holder;
    bool yielded = false;
};

class LockDir final : public PollClient {
public:
    // `dir`: a directory to use, made (mode 1777, so that every user's runs
    // share it) when missing; empty: /run/lock/pto-par, else
    // $TMPDIR/pto-par-locks (/tmp without TMPDIR) when /run/lock cannot be
    // used.
    static Expected<LockDir> open(const std::string& dir);

    LockDir(LockDir&&) noexcept = default;
    LockDir& operator=(LockDir&&) noexcept = default;
    // Its claims go with it; a killed run's are removed by the next look.
    ~LockDir() override { clear_claims(); }

    const std::string& path() const { return path_; }

    // A nested run's: these keys are its job's, leased by the outer run;
    // taking one succeeds at once without a lock, and is never waited for.
    void inherit(std::vector<std::string> keys);

    // All of `keys` now, or none of them and the first that is busy.
    // Descriptors of busy files stay open until the lease is taken, so that
    // trying again wakes nobody (only a holder's close is an event): at
    // most one descriptor per device and port of the run.
    // Fair between runs, first come first served: a run that found a lease
    // held, or left one to another run, waits for it in the open, with a
    // claim (a file "want-KEY@WHEN", locked while it lasts) stamped with
    // when the run began to wait; a free lease is left (Busy::yielded) to
    // a run that waits for it and began to wait first, never to a later
    // one, so that the longest waiting run takes all it tries for and no
    // two runs ever leave leases to each other in a circle. Without that a
    // run giving a device back took it again for its next job before a
    // waiting run could, and that run's wait had no end; and with a rule
    // that had no order, three runs each left a device to the next.
    // `idle`: the run holds no lease, nothing of its own runs: after
    // `patience` of waiting it leaves nothing to others any more (a run
    // that waits first may be stopped, ^Z, and take nothing for hours),
    // and while a lease it waits for is held it looks again every
    // `patience`, whatever wakes it or not (a holder that unlocks without
    // a close makes no event).
    Expected<std::variant<std::vector<Lease>, Busy>> try_take(std::span<const std::string> keys, bool idle = false);
    // After try_take failed: the key whose file could not be used.
    const std::string& failed_key() const { return failed_key_; }

    // Waiting for nothing now (the run has no job left to place): the
    // leases it waited for are others' to take again.
    void stop_waiting() { clear_claims(); }

    // How long an idle run leaves free leases to runs that began to wait
    // before it.
    static constexpr std::chrono::seconds patience{5};
    // A lease found held is looked at once more this long after: another
    // run's try holds each lease of a job for an instant, and gives back
    // without a close (no event) what it took when a later one is busy.
    static constexpr std::chrono::milliseconds second_look{100};

    // Which of `keys` another run holds now, with its pid, neither taking
    // nor waiting (--dry-run). `dir` as open() takes it; a directory that is
    // not there holds nothing, and none is made. A probe that found a lease
    // free closes a descriptor opened for writing: any run whose try failed
    // in that instant is woken to try again.
    static std::vector<Busy> held_now(const std::string& dir, std::span<const std::string> keys);

    // The pid the last holder of `key` wrote (0 if none): who holds it,
    // when try_take said it is busy (for -v, --dry-run, SIGUSR1).
    Expected<Holder> last_holder(const std::string& key);

    // Called from on_ready when a lease in the directory may have been
    // given back: the time to try the waiting jobs again.
    void on_freed(std::function<void()> callback) { on_freed_ = std::move(callback); }

    // PollClient: an epoll of the inotify descriptor, readable when a
    // holder closed a lease file or a claim (IN_CLOSE_WRITE: holders open
    // theirs for writing, and write their pid into it; tries that fail
    // close nothing), and of the patience and second-look timers.
    int poll_fd() const override { return poll_.get(); }
    short poll_events() const override;
    void on_ready(short revents) override;

    // Reads the pending events; true if any was a lease given back (or an
    // idle run's patience ran out: the time to try again). A lease file of
    // this run's removed (its lock then guards nothing: they look like stale
    // pid files, and get cleaned), or the whole directory, is made and
    // locked again at once, before another run can take it.
    bool drain();

    // What went wrong that the run should say: a lease taken again too late.
    void on_notice(std::function<void(const std::string&)> callback) { on_notice_ = std::move(callback); }

private:
    friend class Lease;
    LockDir() = default;
    Expected<int> file_for(const std::string& key);
    // Whether `fd`, just locked, is still the file `key` names (not removed
    // or replaced between its open and its lock).
    bool still_named(int fd, const std::string& key) const;
    // After its file was removed: `key`, held, locked again under its name
    // (with `may_remake`, in the directory made again if it is gone too).
    void relock(const std::string& key, bool may_remake = true);
    // The directory was removed: made again, watched, and every held lease
    // locked again in it. False if it cannot be.
    bool remake();
    void say(const std::string& text) const
    {
        if (on_notice_)
            on_notice_(text);
    }
    static Holder holder_in(int fd);
    // Of `keys`, those that a run which began to wait before this one (or
    // any run, when this one does not wait) waits for now.
    std::set<std::string, std::less<>> claimed_first(std::span<const std::string> keys);
    // This run waits for `key`: its claim, made when it first waits.
    void want(const std::string& key);
    void clear_claims();
    // Wakes the run when an idle run's patience is over, or (`from_now`)
    // a patience from now: the time to look again at a lease held.
    void arm_patience(bool from_now = false);
    // After a lease was found held: a second look soon.
    void arm_second_look();
    // Whether a try now is the one the second look woke the run for.
    bool in_second_look() const;

    std::string path_;
    UniqueFd dir_;
    UniqueFd inotify_;
    UniqueFd timer_;  // a timerfd for patience
    UniqueFd second_look_;  // a timerfd for the look after a lease was found held
    // When the second look woke the run, unless an event has since: the
    // try it woke the run for comes at once, and that try's busy lease gets
    // no look of its own (one look per try, never a polling interval).
    std::chrono::steady_clock::time_point looked_at_{};
    UniqueFd poll_;   // an epoll of both: the run's poll has one descriptor for leases
    std::set<std::string, std::less<>> inherited_;
    std::map<std::string, UniqueFd, std::less<>> open_;     // busy when last tried
    std::map<std::string, UniqueFd, std::less<>> held_;     // this run's leases (Lease), locked
    std::map<std::string, UniqueFd, std::less<>> wanted_;   // this run's claims, by key
    // When this run began to wait, as its claims are named: wall-clock
    // nanoseconds (one clock for every PID and time namespace), pid and a
    // random number, fixed-width so that names compare as times. Empty
    // while it waits for nothing.
    std::string since_;
    std::chrono::steady_clock::time_point since_at_{};
    std::function<void()> on_freed_;
    std::function<void(const std::string&)> on_notice_;
    std::string failed_key_;
};

}  // namespace pto::leases
