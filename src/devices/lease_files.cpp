#include "devices/lease_files.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace pto::leases::files {

Expected<void> make_shared_dir(const std::string& dir)
{
    if (mkdir(dir.c_str(), 01777) == 0) {
        if (chmod(dir.c_str(), 01777) != 0)
            return tl::unexpected(sys_error("chmod 1777 '" + dir + "'", errno));
        return {};
    }
    if (errno == EEXIST)
        return {};
    return tl::unexpected(sys_error("cannot create lock directory '" + dir + "'", errno));
}

std::string fallback_lock_dir()
{
    const char* tmp = std::getenv("TMPDIR");
    return std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/pto-par-locks";
}

void open_to_all(int fd)
{
    struct stat st {};
    if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 0666) != 0666)
        (void)fchmod(fd, 0666);
}

unsigned long long pid_namespace()
{
    struct stat st {};
    return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
}

void write_holder(int fd)
{
    char holder[40];
    const int n = std::snprintf(holder, sizeof holder, "%010d %020llu\n", static_cast<int>(getpid()),
                                pid_namespace());
    (void)!pwrite(fd, holder, static_cast<std::size_t>(n), 0);
}

}  // namespace pto::leases::files
