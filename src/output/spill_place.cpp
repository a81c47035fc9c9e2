#include "output/spill_place.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <pto/job_output.hpp>

namespace pto {
namespace spill {

std::string tmpdir_from_environment()
{
    const char* dir = std::getenv("TMPDIR");
    return dir == nullptr || *dir == '\0' ? std::string("/tmp") : std::string(dir);
}

Expected<int> open_anonymous_file(const std::string& dir)
{
    int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0)
        return fd;
    // Out of descriptors is no property of the directory: the caller waits.
    if (errno == EMFILE || errno == ENFILE)
        return tl::unexpected(sys_error("cannot create a temporary file in " + dir, errno));
    // Not every file system has O_TMPFILE: fall back to create-then-unlink.
    std::string name = dir + "/pto-par-output.XXXXXX";
    fd = mkostemp(name.data(), O_CLOEXEC);
    if (fd < 0)
        return tl::unexpected(sys_error("cannot create a temporary file in " + dir, errno));
    // The name only had to exist for a moment; if unlink fails the file
    // stays behind but the output is still safe.
    (void)unlink(name.c_str());
    return fd;
}

}  // namespace spill

namespace {

using spill::open_anonymous_file;
using spill::tmpdir_from_environment;

// A directory is usable when a file made there takes a byte: a read-only or
// full file system fails here, at start, instead of in the middle of a job.
std::optional<Error> probe(const std::string& dir)
{
    auto fd = open_anonymous_file(dir);
    if (!fd)
        return fd.error();
    const char byte = 0;
    ssize_t n = -1;
    do
        n = write(*fd, &byte, 1);
    while (n < 0 && errno == EINTR);
    const int err = errno;
    (void)close(*fd);  // a file only written to test the place: nothing to lose
    if (n != 1)
        return sys_error("cannot write a temporary file in " + dir, n < 0 ? err : EIO);
    return std::nullopt;
}

std::string size_text(std::size_t bytes)
{
    if (bytes % (1 << 20) == 0)
        return std::to_string(bytes >> 20) + " MiB";
    if (bytes % 1024 == 0)
        return std::to_string(bytes >> 10) + " KiB";
    return std::to_string(bytes) + " bytes";
}

}  // namespace

SpillPlace choose_spill_place(const std::function<void(const std::string&)>& notice, std::size_t memory_limit)
{
    const char* env = std::getenv("TMPDIR");
    const bool from_env = env != nullptr && *env != '\0';
    const std::string first = tmpdir_from_environment();
    const auto failed = probe(first);
    if (!failed)
        return SpillPlace{first, false};
    const std::string what = (from_env ? "$TMPDIR '" : "'") + first + "' is not writable (" +
                             std::strerror(failed->sys_errno != 0 ? failed->sys_errno : EIO) + ")";
    const std::string past = "job output past " + size_text(memory_limit);
    for (const char* dir : {"/tmp", "/var/tmp", "/dev/shm"}) {
        if (dir == first || probe(dir))
            continue;
        notice(what + "; " + past + " goes to " + dir + " instead");
        return SpillPlace{dir, false};
    }
    notice(what + ", nor is /tmp, /var/tmp or /dev/shm; job output is kept in memory, however large");
    return SpillPlace{{}, true};
}

Expected<int> open_spill_file(const SpillPlace& place)
{
    return open_anonymous_file(place.dir.empty() ? tmpdir_from_environment() : place.dir);
}

}  // namespace pto
