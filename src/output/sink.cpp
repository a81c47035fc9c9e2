#include "output/sink.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

namespace pto::output {
namespace {

constexpr std::size_t copy_chunk = 1 << 20;  // per sendfile/copy_file_range call

bool retry(ssize_t n)
{
    return n < 0 && errno == EINTR;
}

// Copies [offset, offset+length) of `in` to `out` at `out_offset`, in the
// kernel where the file systems allow it. False with errno on failure.
bool copy_range(int in, std::uint64_t offset, int out, std::uint64_t out_offset, std::uint64_t length)
{
    bool in_kernel = true;
    std::vector<char> buf;
    while (length > 0) {
        const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(length, copy_chunk));
        ssize_t n = -1;
        if (in_kernel) {
            auto from = static_cast<loff_t>(offset);
            auto to = static_cast<loff_t>(out_offset);
            n = copy_file_range(in, &from, out, &to, want, 0);
            if (retry(n))
                continue;
            if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
                in_kernel = false;  // two file systems that cannot share: copy by hand
                continue;
            }
        } else {
            buf.resize(want);
            n = pread(in, buf.data(), want, static_cast<off_t>(offset));
            if (retry(n))
                continue;
            for (ssize_t put = 0; n > 0 && put < n;) {
                const ssize_t w = pwrite(out, buf.data() + put, static_cast<std::size_t>(n - put),
                                         static_cast<off_t>(out_offset) + put);
                if (retry(w))
                    continue;
                if (w < 0)
                    return false;
                put += w;
            }
        }
        if (n < 0)
            return false;
        if (n == 0) {
            errno = EIO;  // the source is shorter than its owner said
            return false;
        }
        offset += static_cast<std::uint64_t>(n);
        out_offset += static_cast<std::uint64_t>(n);
        length -= static_cast<std::uint64_t>(n);
    }
    return true;
}

}  // namespace

// How a sink gets writes that never block without touching the caller's
// open file description (a shell's terminal must not be left non-blocking):
//   - a FIFO or a character device (terminal, /dev/null, /dev/full) is
//     opened again through /proc/self/fd, giving a description of our own
//     that may be O_NONBLOCK;
//   - a regular file (or block device) keeps the caller's descriptor:
//     opening it again would lose O_APPEND and the offset, and such a write
//     never waits for a reader;
//   - a socket cannot be opened again, but send(MSG_DONTWAIT) asks for a
//     non-blocking write per call.
// Without /proc (or when opening it again is refused) the caller's
// description is made O_NONBLOCK for the run and put back as it was at the
// end: a change others can see, but the only other way is to block.
Expected<std::unique_ptr<Sink>> Sink::open(int fd, std::string name, const SpillPlace& place,
                                           std::size_t memory_limit)
{
    std::unique_ptr<Sink> s(new Sink(fd, std::move(name), memory_limit));
    struct stat st {};
    // A closed descriptor: the first write names the error (EBADF).
    if (fstat(fd, &st) != 0)
        return s;
    const int caller_flags = fcntl(fd, F_GETFL);
    if (S_ISFIFO(st.st_mode))
        s->passable_ = Passable::pipe;
    else if ((S_ISREG(st.st_mode) && caller_flags >= 0 && (caller_flags & O_APPEND) == 0) ||
             (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)))  // /dev/null
        s->passable_ = Passable::file;
    if (S_ISSOCK(st.st_mode)) {
        s->kind_ = Kind::socket;
    } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
        const std::string path = "/proc/self/fd/" + std::to_string(fd);
        const int own = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (own >= 0) {
            s->own_ = UniqueFd(own);
            s->fd_ = own;
        } else if (errno == ENXIO) {
            // A FIFO whose reader is gone already: as EPIPE would say.
            s->reader_gone_ = true;
            return s;
        } else {
            const int flags = fcntl(fd, F_GETFL);
            if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
                return tl::unexpected(sys_error("cannot make " + s->name_ + " non-blocking", errno));
            s->restore_flags_ = flags;
        }
        s->kind_ = Kind::nonblocking;
    } else {
        return s;  // a regular file: plain blocking writes, never pending
    }
    if (!place.memory_only) {
        auto backlog = open_spill_file(place);
        if (!backlog)
            return tl::unexpected(backlog.error());
        s->backlog_ = UniqueFd(*backlog);
    }
    return s;
}

Sink::~Sink()
{
    // The caller's flags as they were; nothing to do if that fails, and the
    // descriptor stays usable either way.
    if (restore_flags_ >= 0)
        (void)fcntl(fd_, F_SETFL, restore_flags_);
}

JobOutput::Passage Sink::passage() const
{
    if (passable_ == Passable::no || dead() || !pieces_.empty() || before_write_)
        return {};
    return {fd_, passable_ == Passable::pipe};
}

ssize_t Sink::put(const char* data, std::size_t size)
{
    if (kind_ == Kind::socket)
        return send(fd_, data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
    return ::write(fd_, data, size);
}

// Sends file bytes with sendfile(2) (a splice in the kernel) where the
// target takes it; terminals and sockets (whose send must not block) get
// pread + put instead.
ssize_t Sink::put_file(int in, std::uint64_t& offset, std::uint64_t length)
{
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(length, copy_chunk));
    if (sendfile_ok_ && kind_ != Kind::socket) {
        auto off = static_cast<off_t>(offset);
        const ssize_t n = sendfile(fd_, in, &off, want);
        if (n >= 0 || (errno != EINVAL && errno != ENOSYS)) {
            if (n > 0)
                offset += static_cast<std::uint64_t>(n);
            return n;
        }
        sendfile_ok_ = false;
    }
    static thread_local std::vector<char> buf;
    buf.resize(std::min<std::size_t>(want, 64 * 1024));
    const ssize_t got = pread(in, buf.data(), buf.size(), static_cast<off_t>(offset));
    if (got <= 0) {
        if (got == 0)
            errno = EIO;  // the file is shorter than its owner said
        return -1;
    }
    const ssize_t n = put(buf.data(), static_cast<std::size_t>(got));
    if (n > 0)
        offset += static_cast<std::uint64_t>(n);
    return n;
}

// False once the reader takes no more for now; errors end the sink.
bool Sink::write_now(const char*& data, std::size_t& size)
{
    while (size > 0 && !dead()) {
        const ssize_t n = put(data, size);
        if (retry(n))
            continue;
        if (n < 0) {
            if (errno != EAGAIN)
                failed(errno);
            return false;
        }
        data += n;
        size -= static_cast<std::size_t>(n);
    }
    return !dead();
}

bool Sink::write_file_now(int in, std::uint64_t& offset, std::uint64_t& length)
{
    while (length > 0 && !dead()) {
        const std::uint64_t before = offset;
        const ssize_t n = put_file(in, offset, length);
        if (retry(n))
            continue;
        if (n < 0) {
            if (errno != EAGAIN)
                failed(errno);
            return false;
        }
        if (n == 0) {
            failed(EIO);  // sendfile moved nothing from a file that has the bytes
            return false;
        }
        length -= offset - before;
    }
    return !dead();
}

void Sink::write(std::string_view bytes)
{
    if (before_write_ && !bytes.empty())
        before_write_();
    const char* data = bytes.data();
    std::size_t size = bytes.size();
    if (!dead() && pieces_.empty())
        write_now(data, size);
    if (dead()) {
        dropped_ += size;
        drop_pending();
        return;
    }
    if (size > 0)
        queue(std::string_view(data, size));
}

void Sink::write(const JobOutput& output)
{
    if (before_write_ && output.size() != 0)
        before_write_();
    write(output.memory());
    if (!output.spilled())
        return;
    std::uint64_t offset = 0;
    std::uint64_t length = output.size();
    if (!dead() && pieces_.empty())
        write_file_now(output.spill_fd(), offset, length);
    if (dead()) {
        dropped_ += length;
        drop_pending();
        return;
    }
    if (length > 0)
        queue_file(output.spill_fd(), offset, length);
}

void Sink::add_file_piece(std::uint64_t from, std::uint64_t to)
{
    if (!pieces_.empty() && pieces_.back().in_file && pieces_.back().to == from)
        pieces_.back().to = to;
    else
        pieces_.push_back(Piece{{}, 0, true, from, to});
    pending_file_ += to - from;
    backlog_end_ = to;
}

void Sink::add_memory_piece(std::string_view bytes)
{
    // Pieces of bounded size, so that a written piece gives its memory back.
    if (pieces_.empty() || pieces_.back().in_file || pieces_.back().bytes.size() >= 64 * 1024)
        pieces_.push_back(Piece{});
    pieces_.back().bytes.append(bytes);
    pending_memory_ += bytes.size();
}

void Sink::queue(std::string_view bytes)
{
    if (backlog_ && pending_memory_ + bytes.size() > memory_limit_) {
        std::uint64_t at = backlog_end_;
        std::string_view left = bytes;
        while (!left.empty()) {
            const ssize_t n = pwrite(backlog_.get(), left.data(), left.size(), static_cast<off_t>(at));
            if (retry(n))
                continue;
            if (n < 0)
                break;
            at += static_cast<std::uint64_t>(n);
            left.remove_prefix(static_cast<std::size_t>(n));
        }
        if (left.empty()) {
            add_file_piece(backlog_end_, at);
            return;
        }
        // A backlog file that takes no more (a full disk): memory then,
        // since losing output is worse than using memory.
    }
    add_memory_piece(bytes);
}

void Sink::queue_file(int in, std::uint64_t offset, std::uint64_t length)
{
    if (backlog_ && copy_range(in, offset, backlog_.get(), backlog_end_, length)) {
        add_file_piece(backlog_end_, backlog_end_ + length);
        return;
    }
    // No backlog (output kept in memory by choice) or a full one.
    std::vector<char> buf(64 * 1024);
    while (length > 0) {
        const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(length, buf.size()));
        const ssize_t n = pread(in, buf.data(), want, static_cast<off_t>(offset));
        if (retry(n))
            continue;
        if (n <= 0) {
            error_ = sys_error("reading job output back from its temporary file", n < 0 ? errno : EIO);
            dropped_ += length;
            drop_pending();
            return;
        }
        add_memory_piece(std::string_view(buf.data(), static_cast<std::size_t>(n)));
        offset += static_cast<std::uint64_t>(n);
        length -= static_cast<std::uint64_t>(n);
    }
}

void Sink::flush()
{
    while (!pieces_.empty() && !dead()) {
        Piece& p = pieces_.front();
        bool more = false;
        if (p.in_file) {
            std::uint64_t offset = p.from;
            std::uint64_t length = p.to - p.from;
            more = write_file_now(backlog_.get(), offset, length);
            pending_file_ -= offset - p.from;
            p.from = offset;
            if (length == 0)
                pieces_.pop_front();
        } else {
            const char* data = p.bytes.data() + p.done;
            std::size_t size = p.bytes.size() - p.done;
            const std::size_t before = size;
            more = write_now(data, size);
            pending_memory_ -= before - size;
            p.done += before - size;
            if (size == 0)
                pieces_.pop_front();
        }
        if (!more)
            break;
    }
    if (dead())
        drop_pending();
    if (pieces_.empty() && backlog_end_ > 0) {
        // Only disk space is at stake: a backlog that keeps its old size
        // is overwritten from the start all the same.
        (void)ftruncate(backlog_.get(), 0);
        backlog_end_ = 0;
    }
}

void Sink::drop_pending()
{
    dropped_ += pending();
    pieces_.clear();
    pending_memory_ = 0;
    pending_file_ = 0;
}

void Sink::failed(int err)
{
    if (err == EPIPE)
        reader_gone_ = true;
    else
        error_ = sys_error("writing " + name_, err);
}

int Sink::poll_fd() const
{
    return dead() || pieces_.empty() ? -1 : fd_;
}

short Sink::poll_events() const
{
    return POLLOUT;
}

void Sink::on_ready(short)
{
    // Whatever poll said (POLLOUT, POLLERR, POLLHUP), the next write tells
    // how things stand: it writes, or it fails with the reason.
    flush();
}

Expected<int> drain(std::span<Sink* const> sinks, int signal_fd, const std::function<int()>& take_stop,
                    int timeout_ms)
{
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    std::vector<pollfd> fds;
    std::vector<Sink*> polled;
    for (;;) {
        fds.clear();
        polled.clear();
        if (signal_fd >= 0)
            fds.push_back({signal_fd, POLLIN, 0});
        for (Sink* s : sinks)
            if (s->poll_fd() >= 0) {
                fds.push_back({s->poll_fd(), s->poll_events(), 0});
                polled.push_back(s);
            }
        if (polled.empty())
            return 0;
        int wait_ms = -1;
        if (timeout_ms >= 0) {
            const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0)
                return 0;
            wait_ms = static_cast<int>(left.count());
        }
        const int n = poll(fds.data(), fds.size(), wait_ms);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return tl::unexpected(sys_error("poll", errno));
        }
        std::size_t first = 0;
        if (signal_fd >= 0) {
            first = 1;
            if (fds[0].revents != 0)
                if (const int sig = take_stop(); sig != 0)
                    return sig;
        }
        for (std::size_t i = first; i < fds.size(); ++i)
            if (fds[i].revents != 0)
                polled[i - first]->on_ready(fds[i].revents);
    }
}

}  // namespace pto::output
