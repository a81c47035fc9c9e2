// A job's spill file on a full disk: the next temporary place that takes
// it whole, else a pause (the job's pipe is not read until there is room),
// and, when the run must end meanwhile, the count of what is lost, apart
// from what a live view had already shown.
#include <pto/job_output.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "output/spill_place.hpp"

namespace pto {

using spill::open_anonymous_file;
using spill::tmpdir_from_environment;

void JobOutput::write_file(std::string_view bytes)
{
    if (paused_) {
        held_back_.append(bytes);  // behind what waits for room, in order
        return;
    }
    while (!bytes.empty() && !error_) {
        const ssize_t n = pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(file_size_));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            const int err = errno;
            const bool full = err == ENOSPC || err == EDQUOT || err == EFBIG;
            if (full && move_to_next_place(err))
                continue;
            // No place has room: the bytes wait here, and the job's pipe is
            // not read until there is room (take_from_pipe). Not for a size
            // limit (EFBIG), which no waiting lifts.
            if ((err == ENOSPC || err == EDQUOT) && pausable_ && !never_pause_) {
                const std::string dir = place_.dir.empty() ? tmpdir_from_environment() : place_.dir;
                if (!pause_said_)
                    notice_ = "no room for its output in " + dir + " (" + std::strerror(err) +
                              ") nor in the other temporary places; it is not read until there is (the job waits)";
                paused_ = true;
                pause_said_ = true;
                held_back_.append(bytes);
                return;
            }
            error_ = sys_error("writing job output to a temporary file", err);
            break;
        }
        file_size_ += static_cast<std::uint64_t>(n);
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    if (bytes.empty())
        return;
    // Everything before the first byte dropped is in the file.
    if (dropped_ == 0)
        drop_from_ = file_size_;
    dropped_ += bytes.size();
}

void JobOutput::mark_shown(std::size_t from_end, std::size_t count) const
{
    const std::uint64_t from = taken_ - std::min<std::uint64_t>(from_end, taken_);
    const std::uint64_t to = std::min<std::uint64_t>(from + count, taken_);
    if (from >= to)
        return;
    if (!shown_.empty() && shown_.back().second >= from)
        shown_.back().second = std::max(shown_.back().second, to);
    else
        shown_.emplace_back(from, to);
}

std::uint64_t JobOutput::unkept_shown() const
{
    const std::uint64_t end = drop_from_ + dropped_;
    std::uint64_t shown = 0;
    for (const auto& [from, to] : shown_)
        if (from < end && to > drop_from_)
            shown += std::min(to, end) - std::max(from, drop_from_);
    return shown;
}

bool JobOutput::resume()
{
    paused_ = false;
    const std::string back = std::exchange(held_back_, std::string());
    write_file(back);
    if (!paused_ && !error_ && pause_said_) {
        notice_ = "there is room for its output again; it is read again";
        pause_said_ = false;
    }
    return !paused_;
}

void JobOutput::stop_pausing()
{
    never_pause_ = true;
    if (paused_)
        resume();  // what still finds no room is lost, and error() says why
}

// A full place: the next of the fallback list ($TMPDIR, /tmp, /var/tmp,
// /dev/shm) after the current one that takes the whole file so far, which
// is copied there; the full one is then given back. Said once per move
// (take_notice). False when none has room.
bool JobOutput::move_to_next_place(int err)
{
    const std::string current = place_.dir.empty() ? tmpdir_from_environment() : place_.dir;
    const std::string places[] = {tmpdir_from_environment(), "/tmp", "/var/tmp", "/dev/shm"};
    bool after = false;
    for (const auto& dir : places) {
        if (dir == current) {
            after = true;
            continue;
        }
        if (!after)
            continue;
        auto fd = open_anonymous_file(dir);
        if (!fd)
            continue;
        // In the kernel where it can; across file systems (EXDEV on most
        // kernels) through a buffer.
        bool copied = true;
        std::vector<char> buf;
        for (loff_t from = 0, to = 0; static_cast<std::uint64_t>(from) < file_size_;) {
            const std::size_t left = static_cast<std::size_t>(file_size_ - static_cast<std::uint64_t>(from));
            ssize_t n = buf.empty() ? copy_file_range(fd_, &from, *fd, &to, left, 0) : 0;
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
                buf.resize(64 * 1024);
                continue;
            }
            if (!buf.empty()) {
                const ssize_t got = pread(fd_, buf.data(), std::min(left, buf.size()), from);
                n = got <= 0 ? -1 : pwrite(*fd, buf.data(), static_cast<std::size_t>(got), to);
                if (n > 0) {
                    from += n;
                    to += n;
                }
            }
            if (n <= 0) {
                copied = false;
                break;
            }
        }
        if (!copied) {
            (void)close(*fd);  // a copy that did not fit: nothing in it is needed
            continue;
        }
        close_file();
        fd_ = *fd;
        place_.dir = dir;
        notice_ = "its output did not fit in " + current + " (" + std::strerror(err) + "); it goes on in " + dir;
        return true;
    }
    return false;
}

}  // namespace pto
