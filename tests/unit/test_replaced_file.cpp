#include <doctest/doctest.h>

#include <sys/file.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/replaced_file.hpp"

#include "scratch_dir.hpp"

namespace fs = std::filesystem;
using pto::ReplacedFile;

namespace {

// A pid that was ours and is reaped: no process has it (until the kernel
// wraps around to it, far more pids away than a test takes).
pid_t dead_pid()
{
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0)
        _exit(0);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    return pid;
}

// A child that lives until it is killed.
struct LiveChild {
    pid_t pid = fork();
    LiveChild()
    {
        REQUIRE(pid >= 0);
        if (pid == 0) {
            for (;;)
                pause();
        }
    }
    ~LiveChild()
    {
        (void)kill(pid, SIGKILL);
        (void)waitpid(pid, nullptr, 0);
    }
    LiveChild(const LiveChild&) = delete;
    LiveChild& operator=(const LiveChild&) = delete;
};

void plant(const fs::path& p)
{
    std::ofstream(p).flush();
    REQUIRE(fs::exists(p));
}

}  // namespace

TEST_SUITE("replaced_file") {

TEST_CASE("opening a report removes the temporaries of its dead runs, not live or other ones")
{
    const pto::test::ScratchDir dir("pto-par-replaced");
    const std::string dead = std::to_string(dead_pid());
    const LiveChild live;
    const fs::path stale = dir.path() / (".report.json." + dead + ".tmp");
    const fs::path stale_retry = dir.path() / (".report.json." + dead + "-2.tmp");
    const fs::path alive = dir.path() / (".report.json." + std::to_string(live.pid) + ".tmp");
    const fs::path other_report = dir.path() / (".other.json." + dead + ".tmp");
    const fs::path not_a_pid = dir.path() / ".report.json.12x.tmp";
    for (const auto& p : {stale, stale_retry, alive, other_report, not_a_pid})
        plant(p);

    auto f = ReplacedFile::open((dir.path() / "report.json").string(), "--json file");
    REQUIRE(f);
    CHECK_FALSE(fs::exists(stale));
    CHECK_FALSE(fs::exists(stale_retry));
    CHECK(fs::exists(alive));
    CHECK(fs::exists(other_report));
    CHECK(fs::exists(not_a_pid));
    REQUIRE(f->commit());
    CHECK(fs::exists(dir.path() / "report.json"));
}

TEST_CASE("a temporary whose pid looks dead but is still locked (another PID namespace) stays")
{
    const pto::test::ScratchDir dir("pto-par-replaced");
    const fs::path held = dir.path() / (".report.json." + std::to_string(dead_pid()) + ".tmp");
    plant(held);
    const int fd = ::open(held.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(flock(fd, LOCK_EX | LOCK_NB) == 0);

    auto f = ReplacedFile::open((dir.path() / "report.json").string(), "--json file");
    REQUIRE(f);
    CHECK(fs::exists(held));
    (void)::close(fd);
}

TEST_CASE("a run's own temporary is locked while it is open, so that other runs leave it")
{
    const pto::test::ScratchDir dir("pto-par-replaced");
    auto f = ReplacedFile::open((dir.path() / "report.json").string(), "--json file");
    REQUIRE(f);
    const fs::path mine = dir.path() / (".report.json." + std::to_string(getpid()) + ".tmp");
    const int fd = ::open(mine.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    CHECK(flock(fd, LOCK_EX | LOCK_NB) != 0);
    (void)::close(fd);
}

}  // TEST_SUITE
