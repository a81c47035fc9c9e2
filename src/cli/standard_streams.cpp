#include "cli/standard_streams.hpp"

#include <sys/stat.h>
#include <unistd.h>

namespace pto::cli {

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
