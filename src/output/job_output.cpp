#include <pto/job_output.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <utility>

namespace pto {
namespace {

// An anonymous file that vanishes with its descriptor: nothing to clean up
// even if the runner is SIGKILLed.
Expected<int> open_spill_file()
{
    const char* dir = std::getenv("TMPDIR");
    if (dir == nullptr || *dir == '\0')
        dir = "/tmp";
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0)
        return fd;
    // Not every file system has O_TMPFILE: fall back to create-then-unlink.
    std::string name = std::string(dir) + "/pto-par-output.XXXXXX";
    fd = mkostemp(name.data(), O_CLOEXEC);
    if (fd < 0)
        return tl::unexpected(sys_error(std::string("cannot create a temporary file in ") + dir, errno));
    // The name only had to exist for a moment; if unlink fails the file
    // stays behind but the output is still safe.
    (void)unlink(name.c_str());
    return fd;
}

}  // namespace

JobOutput::JobOutput(JobOutput&& o) noexcept
    : memory_limit_(o.memory_limit_),
      memory_(std::move(o.memory_)),
      tail_(std::move(o.tail_)),
      fd_(std::exchange(o.fd_, -1)),
      spilled_(o.spilled_),
      file_size_(o.file_size_),
      dropped_(o.dropped_),
      error_(std::move(o.error_))
{
}

JobOutput& JobOutput::operator=(JobOutput&& o) noexcept
{
    if (this != &o) {
        close_file();
        memory_limit_ = o.memory_limit_;
        memory_ = std::move(o.memory_);
        tail_ = std::move(o.tail_);
        fd_ = std::exchange(o.fd_, -1);
        spilled_ = o.spilled_;
        file_size_ = o.file_size_;
        dropped_ = o.dropped_;
        error_ = std::move(o.error_);
    }
    return *this;
}

JobOutput::~JobOutput()
{
    close_file();
}

void JobOutput::close_file()
{
    // Closing a file we only wrote through and will never read again: an
    // error here cannot lose anything anyone will look at.
    if (fd_ >= 0)
        (void)close(fd_);
    fd_ = -1;
}

void JobOutput::remember_tail(std::string_view bytes)
{
    if (bytes.size() >= tail_keep) {
        tail_.assign(bytes.substr(bytes.size() - tail_keep));
        return;
    }
    tail_.append(bytes);
    // Trim in big steps so the copy is amortised over many appends.
    if (tail_.size() > 2 * tail_keep)
        tail_.erase(0, tail_.size() - tail_keep);
}

void JobOutput::append(std::string_view bytes)
{
    if (bytes.empty())
        return;
    remember_tail(bytes);
    if (!spilled_ && memory_.size() + bytes.size() <= memory_limit_) {
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
    auto fd = open_spill_file();
    if (!fd) {
        error_ = fd.error();
    } else {
        fd_ = *fd;
    }
    std::string kept = std::move(memory_);
    memory_ = std::string();  // give the memory back, not just clear it
    write_file(kept);
}

void JobOutput::write_file(std::string_view bytes)
{
    while (!bytes.empty() && fd_ >= 0 && !error_) {
        const ssize_t n = write(fd_, bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR)
                continue;
            error_ = sys_error("writing job output to a temporary file", errno);
            break;
        }
        file_size_ += static_cast<std::uint64_t>(n);
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    dropped_ += bytes.size();
}

Expected<void> JobOutput::for_each_chunk(const std::function<bool(std::string_view)>& sink) const
{
    if (!spilled_) {
        if (!memory_.empty())
            sink(memory_);
        return {};
    }
    std::string buf(64 * 1024, '\0');
    for (std::uint64_t off = 0; off < file_size_;) {
        const ssize_t n = pread(fd_, buf.data(), buf.size(), static_cast<off_t>(off));
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

std::string_view JobOutput::tail(std::size_t max_bytes) const
{
    std::string_view t = tail_;
    return t.size() > max_bytes ? t.substr(t.size() - max_bytes) : t;
}

std::string_view JobOutput::last_line() const
{
    std::string_view all = tail_;
    if (!all.empty() && all.back() == '\n')
        all.remove_suffix(1);
    const auto nl = all.rfind('\n');
    return nl == std::string_view::npos ? all : all.substr(nl + 1);
}

}  // namespace pto
