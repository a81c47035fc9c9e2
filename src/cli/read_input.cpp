#include "cli/read_input.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace pto::cli {
namespace {

std::string size_text(std::size_t bytes)
{
    char buf[32];
    if (bytes < 1024)
        std::snprintf(buf, sizeof buf, "%zu bytes", bytes);
    else if (bytes < 1024 * 1024)
        std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
    else
        std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024 * 1024));
    return buf;
}

void say_progress(std::size_t lines, std::size_t bytes)
{
    const std::string line = "[pto-par] reading the commands file: " + std::to_string(lines) + " line" +
                             (lines == 1 ? "" : "s") + " (" + size_text(bytes) + ") so far\n";
    // A status line nobody can see (stderr closed or full) is no reason to
    // stop reading the commands; the run itself reports stderr's failures.
    (void)!write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace

Expected<InputFile> open_input(const std::string& file)
{
    InputFile in;
    const bool is_stdin = file == "-";
    in.name = is_stdin ? "standard input" : "'" + file + "'";
    in.fd = STDIN_FILENO;
    if (!is_stdin) {
        // O_NONBLOCK: opening a FIFO must not wait for its writer outside
        // the poll, where no signal could end the wait. Standard input's
        // flags are left alone: its file description is shared with
        // whoever started us (a terminal, a shell's pipe).
        in.owned = UniqueFd(open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
        if (!in.owned)
            return tl::unexpected(sys_error("cannot open " + in.name, errno));
        in.fd = in.owned.get();
    }
    struct stat st {};
    // Unknown to fstat (a closed standard input): read() will say what is wrong.
    if (fstat(in.fd, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return fail("cannot read " + in.name + ": it is a directory, not a commands file", EISDIR);
        if (S_ISREG(st.st_mode))
            in.identity = std::pair{st.st_dev, st.st_ino};
    }
    return in;
}

Expected<Input> read_input(const InputFile& in, EarlySignals& signals)
{
    const int fd = in.fd;
    Input input;
    cmdfile::InputCheck check;
    // The signals first: a fast input must never starve Ctrl-C.
    pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {fd, POLLIN, 0}};
    char buf[65536];
    for (;;) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return tl::unexpected(sys_error("poll", errno));
        }
        if (fds[0].revents != 0) {
            auto requests = signals.take();
            if (!requests)
                return tl::unexpected(requests.error());
            if (signals.stop_signal() != 0) {
                input.stop_signal = signals.stop_signal();
                return input;
            }
            if (*requests > 0)
                say_progress(check.line_breaks(), input.text.size());
        }
        if (fds[1].revents == 0)
            continue;
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n == 0)
            return input;
        if (n < 0) {
            // EAGAIN: a FIFO or a non-blocking standard input with nothing
            // in it yet; poll says when there is.
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return tl::unexpected(sys_error("cannot read " + in.name, errno));
        }
        const std::string_view chunk(buf, static_cast<std::size_t>(n));
        if (auto bad = check.feed(chunk)) {
            input.bad = std::move(bad);
            return input;
        }
        input.text.append(chunk);
    }
}

}  // namespace pto::cli
