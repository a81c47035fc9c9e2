#include "cli/read_input.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/unique_fd.hpp"

namespace pto::cli {

Expected<std::string> read_input(const std::string& file)
{
    const bool is_stdin = file == "-";
    const std::string name = is_stdin ? "standard input" : "'" + file + "'";
    UniqueFd owned;
    int fd = STDIN_FILENO;
    if (!is_stdin) {
        owned = UniqueFd(open(file.c_str(), O_RDONLY | O_CLOEXEC));
        if (!owned)
            return tl::unexpected(sys_error("cannot open " + name, errno));
        fd = owned.get();
    }
    struct stat st {};
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
        return fail("cannot read " + name + ": it is a directory, not a commands file", EISDIR);

    std::string text;
    char buf[65536];
    for (;;) {
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n == 0)
            return text;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return tl::unexpected(sys_error("cannot read " + name, errno));
        }
        text.append(buf, static_cast<std::size_t>(n));
    }
}

}  // namespace pto::cli
