// What every part of a lock directory's handling shares: how the directory
// and its files are made open to every user's runs, and the holder's pid.
#pragma once

#include <cstdint>
#include <string>

#include <sys/inotify.h>

#include <pto/error.hpp>

namespace pto::leases::files {

// A holder's close (a lease or a claim given back), and what removes this
// run's files, renames another file onto one, or removes the directory.
inline constexpr std::uint32_t watched_events =
    IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF;

// A directory every user's runs can lease in: made sticky and writable by
// all (as /tmp), whatever the umask; an existing one is used as it is.
Expected<void> make_shared_dir(const std::string& dir);

// Where leases go when /run/lock cannot be used.
std::string fallback_lock_dir();

// A file of the lock directory this user made: 0666, so that another
// user's run can use it too. Best effort: a file another user made keeps
// its mode, which they chose.
void open_to_all(int fd);

// The inode of this process's PID namespace, 0 where it cannot be known.
unsigned long long pid_namespace();

// This run's pid and PID namespace in a lease it holds, for Busy and
// last_holder ("0000004242 00000000004026531836\n"): written in
// place, at once, of one width (zeros in front), so that it needs no
// truncation: ext4 writes a file truncated to nothing and written again out
// to disk when it is closed (auto_da_alloc), which made each job of W1 wait
// about 3 ms. Only that answer is lost if it cannot be written (a full
// disk): the lease is held all the same.
void write_holder(int fd);

}  // namespace pto::leases::files
