#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

// `integration_tests --unkillable PIDFILE`: what a copy of this binary made
// setuid root does for the quarantine tests: become root through and
// through (as sudo does), so that an unprivileged pto-par may not signal it,
// say its pid, and wait to be killed by the test.
static int unkillable(const char* pidfile)
{
    if (setresuid(0, 0, 0) != 0)
        return 3;
    const std::string pid = std::to_string(getpid());
    const int fd = open(pidfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, pid.data(), pid.size()) != static_cast<ssize_t>(pid.size()) || close(fd) != 0)
        return 4;
    for (;;)
        pause();
}

int main(int argc, char** argv)
{
    if (argc == 3 && std::strcmp(argv[1], "--unkillable") == 0)
        return unkillable(argv[2]);
    // A program that exits before reading the standard input a test gives
    // it (a usage error) must not kill the test binary with SIGPIPE: the
    // write then fails with EPIPE, which Process ignores. Children get the
    // default back.
    signal(SIGPIPE, SIG_IGN);
    // Leases in a lock directory of this test process's own, never in
    // /run/lock: the runs of one suite lease as any run does, and neither
    // the suites run beside it nor CI runners on the machine wait for them.
    std::string locks = (std::filesystem::temp_directory_path() / "pto-par-test-locks-XXXXXX").string();
    // Mode 1777 as pto-par makes its own: some tests run it as another user.
    if (mkdtemp(locks.data()) == nullptr || chmod(locks.c_str(), 01777) != 0 ||
        setenv("PTO_PAR_LOCK_DIR", locks.c_str(), 1) != 0)
        return 2;
    doctest::Context context(argc, argv);
    const int status = context.run();
    std::error_code ignored;  // a leftover in $TMPDIR is no test's failure
    std::filesystem::remove_all(locks, ignored);
    return status;
}
