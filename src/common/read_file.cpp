#include "common/read_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "common/unique_fd.hpp"

namespace pto {

Expected<std::string> read_file(const std::string& path, std::size_t max_bytes, const std::string& what)
{
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd)
        return tl::unexpected(sys_error("cannot open " + what, errno));
    std::string text;
    char buf[65536];
    for (;;) {
        const ssize_t n = read(fd.get(), buf, sizeof buf);
        if (n == 0)
            return text;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return tl::unexpected(sys_error("cannot read " + what, errno));
        }
        text.append(buf, static_cast<std::size_t>(n));
        if (text.size() > max_bytes)
            return fail(what + " is larger than " + std::to_string(max_bytes) + " bytes", E2BIG);
    }
}

}  // namespace pto
