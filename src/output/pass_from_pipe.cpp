// A live job's bytes on their way to standard output without a copy through
// user space where that is the cheaper way:
//   - to a pipe: tee(2) the job's pipe to it, then splice(2) the same bytes
//     on into the pipe that keeps the end of the output. That end's pipe is
//     cut back to its last tail_keep bytes (spliced to /dev/null) as it
//     grows, and read into memory only when someone looks (settle): a
//     TIMEOUT dump or a status report sees the end as ever.
//   - to a regular file or /dev/null, which tee cannot write: only what the
//     job's pipe holds before its last tail_keep bytes is spliced on; that
//     end is read, as it is kept anyway, and written by the caller. Keeping
//     it in a pipe instead (tee into the end's pipe, then splice to the
//     file) shares each page between two pipes, so the job's pipe never
//     gets it back for the job's next write: the job paid a fresh page and
//     its charge for every 4 KiB it wrote, and W3 took 1.2-1.6x `writer |
//     cat` that way against 0.9-1.0x for a read of the same bytes.
#include <pto/job_output.hpp>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <vector>

namespace pto {
namespace {

// As wide as a job's widened pipe, the most an unprivileged process may ask
// for (/proc/sys/fs/pipe-max-size): a tee into a pipe without room moves
// less, and the rest waits for the next wake-up.
constexpr int passed_pipe_size = 1 << 20;

// One splice of exactly `n` bytes or fewer; -1 with errno.
ssize_t splice_some(int from, int to, std::size_t n)
{
    for (;;) {
        const ssize_t got = splice(from, nullptr, to, nullptr, n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (got < 0 && errno == EINTR)
            continue;
        return got;
    }
}

}  // namespace

bool JobOutput::begin_passing()
{
    if (passed_w_ >= 0)
        return true;
    int ends[2];
    if (pipe2(ends, O_NONBLOCK | O_CLOEXEC) != 0)
        return false;  // out of descriptors: the bytes go the usual way
    passed_r_ = ends[0];
    passed_w_ = ends[1];
    // Refused past the user's pipe memory (EPERM): a smaller pipe only
    // makes the moves smaller.
    (void)fcntl(passed_w_, F_SETPIPE_SZ, passed_pipe_size);
    const int room = fcntl(passed_w_, F_GETPIPE_SZ);
    passed_room_ = room > 0 ? static_cast<std::uint64_t>(room) : 64 * 1024;
    null_ = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null_ < 0) {
        end_passing();
        return false;
    }
    keep_end_only();
    return true;
}

void JobOutput::keep_end_only()
{
    if (tail_only_)
        return;
    // What waited for room was shown with the rest (for_each_chunk): it
    // waits no more.
    const std::string back = std::exchange(held_back_, std::string());
    paused_ = false;
    pause_said_ = false;
    const std::string end = tail(tail_keep);
    discarded_ = size() - end.size();
    close_file();
    spilled_ = false;
    file_size_ = 0;
    tail_only_ = true;
    memory_ = end;
    held_ = end.size();
    // keep_tail and take_from_pipe expect a tail-only buffer of full size.
    memory_.resize(tail_bound());
    keep_tail(back);
}

void JobOutput::end_passing()
{
    // Pipes and /dev/null, read from or written to only: nothing to lose at close.
    for (int* fd : {&passed_r_, &passed_w_, &null_})
        if (*fd >= 0) {
            (void)close(*fd);
            *fd = -1;
        }
}

void JobOutput::trim_passed(bool now)
{
    // Past a quarter of its room (or `now`), cut back to the end kept: the
    // room is counted in pages the bytes may not fill, and the next tee
    // needs some.
    if (passed_ <= (now ? std::min<std::uint64_t>(tail_keep, passed_room_ / 4) : passed_room_ / 4))
        return;
    const std::uint64_t goes = passed_ - std::min<std::uint64_t>(tail_keep, passed_room_ / 4);
    std::uint64_t gone = 0;
    while (gone < goes) {
        const ssize_t n = splice_some(passed_r_, null_, static_cast<std::size_t>(goes - gone));
        if (n <= 0)
            break;  // cannot happen with bytes in the pipe; the end is only longer
        gone += static_cast<std::uint64_t>(n);
    }
    passed_ -= gone;
    discarded_ += gone;
    if (gone > 0)
        forget_held();
}

void JobOutput::drop_passed()
{
    while (passed_ > 0) {
        const ssize_t n = splice_some(passed_r_, null_, static_cast<std::size_t>(passed_));
        if (n <= 0)
            break;  // cannot happen with bytes in the pipe
        passed_ -= static_cast<std::uint64_t>(n);
        discarded_ += static_cast<std::uint64_t>(n);
    }
    // Whatever could not be dropped is not counted twice.
    discarded_ += passed_;
    passed_ = 0;
    forget_held();
}

void JobOutput::forget_held()
{
    discarded_ += held_;
    held_ = 0;
}

void JobOutput::settle()
{
    if (passed_ == 0)
        return;
    static thread_local std::vector<char> buf;
    buf.resize(64 * 1024);
    while (passed_ > 0) {
        const ssize_t n = read(passed_r_, buf.data(), std::min<std::uint64_t>(buf.size(), passed_));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            // Cannot happen with bytes in the pipe; the tail is only shorter.
            discarded_ += passed_;
            passed_ = 0;
            break;
        }
        passed_ -= static_cast<std::uint64_t>(n);
        keep_tail(std::string_view(buf.data(), static_cast<std::size_t>(n)));
    }
}

bool JobOutput::pass_before_end(int fd, const Passage& to)
{
    keep_end_only();
    int held = 0;
    if (ioctl(fd, FIONREAD, &held) != 0 || held <= static_cast<int>(tail_keep))
        return true;  // all of it may be the end (FIONREAD fails on no pipe)
    const auto goes = static_cast<std::size_t>(held) - tail_keep;
    std::size_t moved = 0;
    while (moved < goes) {
        const ssize_t n = splice_some(fd, to.fd, goes - moved);
        if (n <= 0)
            break;
        moved += static_cast<std::size_t>(n);
    }
    // Passed on and nobody else's to keep: counted, not held.
    discarded_ += moved;
    if (moved > 0)
        forget_held();
    // The file took less (EINVAL: no splice there; a full file system, a
    // size limit): the rest is read and written as usual, which names why.
    return moved == goes;
}

JobOutput::Taken JobOutput::pass_from_pipe(int fd, std::size_t max_bytes, const Passage& to)
{
    if (!begin_passing())
        return {0, false, true};
    widen(fd);
    trim_passed();
    // The first move only copies (tee), the second takes the same bytes out
    // of the job's pipe into the end's.
    ssize_t n = -1;
    do
        n = tee(fd, to.fd, max_bytes, SPLICE_F_NONBLOCK);
    while (n < 0 && errno == EINTR);
    if (n == 0)
        return {0, true, false};  // no writer left and nothing in the pipe
    if (n < 0)
        // EAGAIN: an empty job pipe or a full `to`; the usual read tells
        // which. EINVAL and the like: no tee here.
        return {0, false, true};
    const auto teed = static_cast<std::size_t>(n);
    std::size_t moved = 0;
    for (bool made_room = false; moved < teed;) {
        const ssize_t m = splice_some(fd, passed_w_, teed - moved);
        if (m > 0) {
            moved += static_cast<std::size_t>(m);
            passed_ += static_cast<std::uint64_t>(m);
            continue;
        }
        // A full end's pipe (pages little filled) is cut back to the end once.
        if (made_room)
            break;
        trim_passed(true);
        made_room = true;
    }
    if (moved < teed) {
        // The end's pipe took less: the rest is on standard output already
        // and must leave the job's pipe without going there twice. The end
        // starts again after it.
        drop_passed();
        for (std::size_t left = teed - moved; left > 0;) {
            const ssize_t m = splice_some(fd, null_, left);
            if (m <= 0)
                break;  // cannot happen: the bytes are in the pipe
            left -= static_cast<std::size_t>(m);
            discarded_ += static_cast<std::uint64_t>(m);
        }
    }
    return {teed, false, false};
}

}  // namespace pto
