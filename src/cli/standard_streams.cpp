#include "cli/standard_streams.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace pto::cli {

Expected<bool> fill_closed_streams()
{
    bool output_closed = false;
    for (int fd = 0; fd <= 2; ++fd) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
            continue;
        output_closed = output_closed || fd == STDOUT_FILENO;
        // open takes the lowest free number: fd itself, those below it being
        // open or filled already.
        const int got = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
        if (got == -1)
            return tl::unexpected(sys_error("opening /dev/null for closed descriptor " + std::to_string(fd), errno));
    }
    return output_closed;
}

bool same_terminal(int a, int b)
{
    struct stat sa {}, sb {};
    return isatty(a) == 1 && isatty(b) == 1 && fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_rdev == sb.st_rdev;
}

bool same_destination(int a, int b)
{
    struct stat sa {}, sb {};
    if (fstat(a, &sa) != 0 || fstat(b, &sb) != 0)
        return false;
    // Of character devices only a terminal is read back: both on /dev/null
    // is no log, and needs no order (nor costs the live block its splice).
    if (S_ISCHR(sa.st_mode) || S_ISCHR(sb.st_mode))
        return same_terminal(a, b);
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace pto::cli
