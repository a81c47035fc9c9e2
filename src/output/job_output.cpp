#include <pto/job_output.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

namespace pto {

// What is reserved is the descriptor (and its place in the system's file
// table): /dev/null stands in for the spill file until the output outgrows
// memory, and is closed just before the file is opened, so that the open
// finds a free descriptor. Creating the file itself up front would cost
// every job an O_TMPFILE create and delete, a journal transaction on ext4
// (0.3 ms here, a third of a `true` job), though most jobs never spill; the
// directory was tried at start (choose_spill_place).
Expected<JobOutput> JobOutput::reserve(const SpillPlace& place, std::size_t memory_limit)
{
    JobOutput out;
    out.memory_limit_ = memory_limit;
    if (place.memory_only)
        return out;
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tl::unexpected(sys_error("cannot reserve a descriptor for a job's output", errno));
    out.fd_ = fd;
    out.place_ = place;
    return out;
}

JobOutput JobOutput::tail_only(std::size_t memory_limit)
{
    JobOutput out;
    out.memory_limit_ = memory_limit;
    out.tail_only_ = true;
    return out;
}

JobOutput::JobOutput(JobOutput&& o) noexcept
    : memory_limit_(o.memory_limit_),
      widened_(o.widened_),
      place_(std::move(o.place_)),
      memory_(std::move(o.memory_)),
      held_(o.held_),
      fd_(std::exchange(o.fd_, -1)),
      tail_only_(o.tail_only_),
      spilled_(o.spilled_),
      file_size_(o.file_size_),
      discarded_(o.discarded_),
      dropped_(o.dropped_),
      drop_from_(o.drop_from_),
      taken_(o.taken_),
      shown_(std::move(o.shown_)),
      error_(std::move(o.error_)),
      notice_(std::move(o.notice_)),
      never_pause_(o.never_pause_),
      paused_(o.paused_),
      pause_said_(o.pause_said_),
      held_back_(std::move(o.held_back_)),
      passed_r_(std::exchange(o.passed_r_, -1)),
      passed_w_(std::exchange(o.passed_w_, -1)),
      passed_(std::exchange(o.passed_, 0)),
      passed_room_(o.passed_room_),
      null_(std::exchange(o.null_, -1))
{
}

JobOutput& JobOutput::operator=(JobOutput&& o) noexcept
{
    if (this != &o) {
        close_file();
        end_passing();
        memory_limit_ = o.memory_limit_;
        widened_ = o.widened_;
        place_ = std::move(o.place_);
        memory_ = std::move(o.memory_);
        held_ = o.held_;
        fd_ = std::exchange(o.fd_, -1);
        tail_only_ = o.tail_only_;
        spilled_ = o.spilled_;
        file_size_ = o.file_size_;
        discarded_ = o.discarded_;
        dropped_ = o.dropped_;
        drop_from_ = o.drop_from_;
        taken_ = o.taken_;
        shown_ = std::move(o.shown_);
        error_ = std::move(o.error_);
        notice_ = std::move(o.notice_);
        never_pause_ = o.never_pause_;
        paused_ = o.paused_;
        pause_said_ = o.pause_said_;
        held_back_ = std::move(o.held_back_);
        passed_r_ = std::exchange(o.passed_r_, -1);
        passed_w_ = std::exchange(o.passed_w_, -1);
        passed_ = std::exchange(o.passed_, 0);
        passed_room_ = o.passed_room_;
        null_ = std::exchange(o.null_, -1);
    }
    return *this;
}

JobOutput::~JobOutput()
{
    close_file();
    end_passing();
}

void JobOutput::close_file()
{
    // An unlinked file nobody will read again: an error at close cannot
    // lose anything anyone will look at.
    if (fd_ >= 0)
        (void)close(fd_);
    fd_ = -1;
}

void JobOutput::append(std::string_view bytes)
{
    if (bytes.empty())
        return;
    taken_ += bytes.size();
    if (tail_only_) {
        keep_tail(bytes);
        return;
    }
    if (!spilled_ && (place_.memory_only || memory_.size() + bytes.size() <= memory_limit_)) {
        memory_.append(bytes);
        return;
    }
    if (!spilled_)
        spill();
    write_file(bytes);
}

void JobOutput::spill()
{
    spilled_ = true;
    close_file();  // the stand-in: its descriptor is the file's
    auto fd = open_spill_file(place_);
    if (fd)
        fd_ = *fd;
    else
        error_ = fd.error();
    std::string kept = std::move(memory_);
    memory_ = std::string();  // give the memory back, not just clear it
    write_file(kept);
}

std::optional<std::string> JobOutput::take_notice()
{
    if (notice_.empty())
        return std::nullopt;
    return std::exchange(notice_, std::string());
}

// The buffer grows as a string would up to tail_bound(); past that it keeps
// its size and is cut back to its last tail_keep bytes whenever it fills,
// which copies tail_keep bytes per (tail_bound() - tail_keep) taken.
void JobOutput::keep_tail(std::string_view bytes)
{
    const std::size_t bound = tail_bound();
    if (held_ + bytes.size() <= bound) {
        if (memory_.size() < held_ + bytes.size())
            memory_.resize(std::min(bound, std::max(held_ + bytes.size(), 2 * memory_.size())));
        std::memcpy(memory_.data() + held_, bytes.data(), bytes.size());
        held_ += bytes.size();
        return;
    }
    memory_.resize(bound);
    // The new tail: the end of what was held (held_ > tail_keep here when
    // `bytes` alone is shorter than the tail), then `bytes`.
    const std::size_t from_held = bytes.size() >= tail_keep ? 0 : tail_keep - bytes.size();
    const std::size_t from_bytes = tail_keep - from_held;
    std::memmove(memory_.data(), memory_.data() + held_ - from_held, from_held);
    std::memcpy(memory_.data() + from_held, bytes.data() + bytes.size() - from_bytes, from_bytes);
    discarded_ += held_ + bytes.size() - tail_keep;
    held_ = tail_keep;
}

namespace {

// One read of a job's pipe: the byte count; 0 when nothing is there yet
// (EAGAIN); -1 at EOF, or after an error that makes the pipe unreadable,
// which ends it either way.
ssize_t read_once(int fd, char* buf, std::size_t size)
{
    for (;;) {
        const ssize_t n = read(fd, buf, size);
        if (n > 0)
            return n;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        return -1;
    }
}

}  // namespace

void JobOutput::widen(int fd)
{
    if (widened_ || size() <= memory_limit_)
        return;
    widened_ = true;
    // A job that prints this much gets a wider pipe: it blocks, and wakes
    // the loop, a sixteenth as often. Only such jobs, since the kernel
    // counts pipe memory per user (pipe-user-pages-soft) and the jobs' own
    // pipelines share it. Refused (EPERM past that limit): the pipe keeps
    // working at its size.
    (void)fcntl(fd, F_SETPIPE_SZ, wide_pipe);
}

JobOutput::Taken JobOutput::take_from_pipe(int fd, std::size_t max_bytes,
                                           const std::function<void(std::string_view)>& live)
{
    widen(fd);
    // Bytes that passed before (pass_from_pipe) come before these in the end kept.
    settle();
    // Only bytes taken from a pipe may wait for room: the pipe then waits too.
    pausable_ = true;
    const struct Unpausable {
        bool& flag;
        ~Unpausable() { flag = false; }
    } unpausable{pausable_};
    if (paused_ && !resume())
        return {0, false};
    // The first memory_limit bytes are read, as most jobs print no more:
    // they never touch the disk.
    if (!live && spilled_ && !error_) {
        for (;;) {
            auto off = static_cast<loff_t>(file_size_);
            const ssize_t n = splice(fd, nullptr, fd_, &off, max_bytes, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                file_size_ += static_cast<std::uint64_t>(n);
                taken_ += static_cast<std::uint64_t>(n);
                return {static_cast<std::size_t>(n), false};
            }
            if (n == 0)
                return {0, true};
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return {0, false};
            // EINVAL: a file system that takes no splice; ENOSPC and the
            // like: the read below keeps the bytes flowing and names the
            // error (counting what is lost) if the file refuses them too.
            break;
        }
    }
    // A job past its tail_bound() reads straight into the end of its kept
    // bytes: nothing is copied in user space but the tail, when the buffer
    // fills. Measured on W3 (1 GiB): splicing all but the pipe's last
    // 64 KiB to /dev/null instead took more time and CPU (0.31 s against
    // 0.28 s with --output none), as it costs a FIONREAD and a splice
    // besides the read on each of the many small wake-ups; reading into
    // scratch and copying the end of each read out (most of it: reads are
    // about 100 KiB) took 0.315 s against 0.302 s with --output stream.
    if (tail_only_ && discarded_ > 0) {
        // memory_ has its full size here (keep_tail made it so).
        if (memory_.size() - held_ < tail_keep) {
            std::memmove(memory_.data(), memory_.data() + held_ - tail_keep, tail_keep);
            discarded_ += held_ - tail_keep;
            held_ = tail_keep;
        }
        const ssize_t n = read_once(fd, memory_.data() + held_, std::min(max_bytes, memory_.size() - held_));
        if (n <= 0)
            return {0, n < 0};
        const std::string_view bytes(memory_.data() + held_, static_cast<std::size_t>(n));
        held_ += bytes.size();
        taken_ += bytes.size();
        if (live)
            live(bytes);
        return {bytes.size(), false};
    }
    // One buffer for every job: the loop handles one pipe at a time.
    static thread_local std::vector<char> scratch;
    scratch.resize(std::max(scratch.size(), max_bytes));
    const ssize_t n = read_once(fd, scratch.data(), max_bytes);
    if (n <= 0)
        return {0, n < 0};
    const std::string_view bytes(scratch.data(), static_cast<std::size_t>(n));
    append(bytes);
    if (live)
        live(bytes);
    return {bytes.size(), false};
}

Expected<void> JobOutput::for_each_chunk(const std::function<bool(std::string_view)>& sink) const
{
    if (!spilled_) {
        if (!memory().empty())
            sink(memory());
        return {};
    }
    std::string buf(64 * 1024, '\0');
    for (std::uint64_t off = 0; off < file_size_;) {
        const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), file_size_ - off));
        const ssize_t n = pread(fd_, buf.data(), want, static_cast<off_t>(off));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return tl::unexpected(sys_error("reading job output back from its temporary file", errno));
        }
        if (n == 0)
            return fail("job output's temporary file is shorter than what was written");
        off += static_cast<std::uint64_t>(n);
        if (!sink(std::string_view(buf.data(), static_cast<std::size_t>(n))))
            return {};
    }
    if (!held_back_.empty())
        sink(held_back_);
    return {};
}

Expected<std::string> JobOutput::str() const
{
    std::string all;
    auto ok = for_each_chunk([&all](std::string_view chunk) {
        all.append(chunk);
        return true;
    });
    if (!ok)
        return tl::unexpected(ok.error());
    return all;
}

std::string JobOutput::tail(std::size_t max_bytes) const
{
    if (!spilled_) {
        const std::string_view kept = memory();
        const std::size_t want = std::min({max_bytes, tail_keep, kept.size()});
        return std::string(kept.substr(kept.size() - want));
    }
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>({max_bytes, tail_keep, file_size_}));
    std::string t(want, '\0');
    const std::uint64_t from = file_size_ - want;
    for (std::size_t got = 0; got < want;) {
        const ssize_t n = pread(fd_, t.data() + got, want - got, static_cast<off_t>(from + got));
        if (n < 0 && errno == EINTR)
            continue;
        // A status report is no place to fail: what could be read is shown.
        if (n <= 0) {
            t.resize(got);
            break;
        }
        got += static_cast<std::size_t>(n);
    }
    return t;
}

std::string JobOutput::last_line() const
{
    std::string all = tail(tail_keep);
    if (!all.empty() && all.back() == '\n')
        all.pop_back();
    const auto nl = all.rfind('\n');
    return nl == std::string::npos ? all : all.substr(nl + 1);
}

}  // namespace pto
