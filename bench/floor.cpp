// The floor of bench/run: the least a runner can do to run N shell commands
// P at a time. It posix_spawns `/bin/sh -c CMD`, keeps P of them in flight
// and waitpid()s; no pipes, no process groups, no bookkeeping. Whatever a
// real runner costs beyond this is its own overhead.
//
//     floor N P CMD        e.g. floor 2000 2 true
//
// Built by bench/run with `c++ -O2`, deliberately outside Meson: it is a
// measuring stick, not part of the project.
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern char** environ;

int main(int argc, char** argv)
{
    if (argc != 4) {
        std::fprintf(stderr, "usage: floor N P CMD\n");
        return 2;
    }
    const long total = std::strtol(argv[1], nullptr, 10);
    const long width = std::strtol(argv[2], nullptr, 10);
    if (total < 0 || width < 1) {
        std::fprintf(stderr, "floor: N must be >= 0 and P >= 1\n");
        return 2;
    }
    char sh[] = "/bin/sh";
    char dash_c[] = "-c";
    char* const child_argv[] = {sh, dash_c, argv[3], nullptr};

    long started = 0;
    long running = 0;
    int failures = 0;
    while (started < total || running > 0) {
        while (started < total && running < width) {
            pid_t pid = 0;
            // posix_spawn returns the error; it does not set errno.
            const int err = posix_spawn(&pid, sh, nullptr, nullptr, child_argv, environ);
            if (err != 0) {
                std::fprintf(stderr, "floor: posix_spawn /bin/sh: %s\n", std::strerror(err));
                return 1;
            }
            ++started;
            ++running;
        }
        int status = 0;
        const pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            std::perror("floor: waitpid");
            return 1;
        }
        --running;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            ++failures;
    }
    if (failures != 0) {
        std::fprintf(stderr, "floor: %d of %ld commands failed\n", failures, total);
        return 1;
    }
    return 0;
}
