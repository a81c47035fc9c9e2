// A live job's bytes on their way to standard output without a copy through
// user space. Two moves per wake-up, both of page references:
//   - to a pipe: tee(2) the job's pipe to it, then splice(2) the same bytes
//     on into the pipe that keeps the end of the output;
//   - to a regular file or /dev/null, which tee cannot write: tee the job's
//     pipe into the end's pipe, then splice the same bytes on to the file.
// The end's pipe is cut back to its last tail_keep bytes (spliced to
// /dev/null) as it grows, and read into memory only when someone looks
// (settle): a TIMEOUT dump or a status report sees the end as ever.
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

bool holds_bytes(int pipe_fd)
{
    int bytes = 0;
    return ioctl(pipe_fd, FIONREAD, &bytes) == 0 && bytes > 0;
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

JobOutput::Taken JobOutput::pass_from_pipe(int fd, std::size_t max_bytes, const Passage& to)
{
    if (!begin_passing())
        return {0, false, true};
    widen(fd);
    trim_passed();
    // Through a pipe to `to`: the first move only copies (tee), the second
    // takes the same bytes out of the job's pipe.
    const int first_to = to.pipe ? to.fd : passed_w_;
    const int then_to = to.pipe ? passed_w_ : to.fd;
    ssize_t n = -1;
    for (int made_room = 0;;) {
        n = tee(fd, first_to, max_bytes, SPLICE_F_NONBLOCK);
        if (n < 0 && errno == EINTR)
            continue;
        // With bytes in the job's pipe, the end's pipe is full of pages
        // little filled: it is cut back to the end, else it starts again.
        // (An empty job's pipe says EAGAIN too.)
        if (n < 0 && errno == EAGAIN && !to.pipe && passed_ > 0 && made_room < 2 && holds_bytes(fd)) {
            if (made_room++ == 0)
                trim_passed(true);
            else
                drop_passed();
            continue;
        }
        break;
    }
    if (n == 0)
        return {0, true, false};  // no writer left and nothing in the pipe
    if (n < 0)
        // EAGAIN: an empty job pipe, a full `to` or a full end's pipe; the
        // usual read tells which. EINVAL and the like: no tee here.
        return {0, false, true};
    const auto teed = static_cast<std::size_t>(n);
    std::size_t moved = 0;
    for (bool made_room = false; moved < teed;) {
        const ssize_t m = splice_some(fd, then_to, teed - moved);
        if (m > 0) {
            moved += static_cast<std::size_t>(m);
            if (to.pipe)
                passed_ += static_cast<std::uint64_t>(m);  // now in the end's pipe
            continue;
        }
        // A full end's pipe (pages little filled) is cut back to the end once.
        if (!to.pipe || made_room)
            break;
        trim_passed(true);
        made_room = true;
    }
    if (moved == teed) {
        if (!to.pipe)
            passed_ += teed;  // in the end's pipe since the tee
        return {teed, false, false};
    }
    if (to.pipe) {
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
        return {teed, false, false};
    }
    // The file took less (a full file system, a size limit): the rest stays
    // in the job's pipe for the usual read, which names the error; the end,
    // which holds it too, starts again after it.
    passed_ += teed;
    drop_passed();
    discarded_ -= teed - moved;
    return {moved, false, true};
}

}  // namespace pto
