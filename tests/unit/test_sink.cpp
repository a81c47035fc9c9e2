#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "output/sink.hpp"

using pto::JobOutput;
using pto::SpillPlace;
using pto::output::Sink;

namespace {

struct Pipe {
    int r = -1, w = -1;
    Pipe() { REQUIRE(pipe2(&r, O_CLOEXEC) == 0); }
    ~Pipe()
    {
        if (r >= 0)
            close(r);
        if (w >= 0)
            close(w);
    }
};

// Reads from `fd` while flushing `sink`, until `want` bytes came or the
// sink has nothing left; what a reader that comes back would see.
std::string read_back(int fd, Sink& sink, std::size_t want)
{
    std::string got;
    char buf[65536];
    while (got.size() < want) {
        sink.flush();
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 1000) <= 0)
            break;
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            break;
        got.append(buf, static_cast<std::size_t>(n));
    }
    return got;
}

std::string pattern(std::size_t size, char salt)
{
    std::string s(size, '\0');
    for (std::size_t i = 0; i < size; ++i)
        s[i] = static_cast<char>('a' + (i * 7 + static_cast<std::size_t>(salt)) % 26);
    return s;
}

}  // namespace

TEST_SUITE("sink") {

TEST_CASE("writes to a pipe nobody reads return at once; the bytes come out whole and in order later")
{
    Pipe p;
    auto sink = Sink::open(p.w, "the pipe", SpillPlace{}, 64 * 1024);
    REQUIRE(sink);
    Sink& s = **sink;
    // The caller's open file description is left as it was.
    CHECK((fcntl(p.w, F_GETFL) & O_NONBLOCK) == 0);

    const std::string a = pattern(3 << 20, 'a');
    const std::string b = pattern(5000, 'b');
    auto spilled = JobOutput::reserve(SpillPlace{}, 4096);
    REQUIRE(spilled);
    const std::string c = pattern(2 << 20, 'c');
    spilled->append(c);
    REQUIRE(spilled->spilled());

    const auto t0 = std::chrono::steady_clock::now();
    s.write(a);
    s.write(*spilled);
    s.write(b);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
    CHECK(s.poll_fd() >= 0);
    CHECK((s.poll_events() & POLLOUT) != 0);
    // The pipe took what it holds; the rest waits.
    CHECK(s.pending() > a.size() + c.size() + b.size() - (1 << 20));

    const std::string all = a + c + b;
    CHECK(read_back(p.r, s, all.size()) == all);
    CHECK(s.pending() == 0);
    CHECK(s.poll_fd() < 0);
    CHECK(s.dropped() == 0);
    CHECK_FALSE(s.error());
}

TEST_CASE("an idle sink writes at once")
{
    Pipe p;
    auto sink = Sink::open(p.w, "the pipe", SpillPlace{});
    REQUIRE(sink);
    (*sink)->write("hello\n");
    CHECK((*sink)->pending() == 0);
    char buf[16];
    CHECK(read(p.r, buf, sizeof buf) == 6);
}

TEST_CASE("a reader that leaves: the bytes are counted as dropped, no error")
{
    Pipe p;
    auto sink = Sink::open(p.w, "the pipe", SpillPlace{});
    REQUIRE(sink);
    Sink& s = **sink;
    // As pto-par's main does: EPIPE instead of death.
    signal(SIGPIPE, SIG_IGN);
    const int capacity = fcntl(p.w, F_GETPIPE_SZ);
    REQUIRE(capacity > 0);
    s.write(pattern(200000, 'x'));
    close(p.r);
    p.r = -1;
    s.flush();
    s.write("more");
    CHECK(s.reader_gone());
    CHECK_FALSE(s.error());
    CHECK(s.pending() == 0);
    CHECK(s.dropped() == 200000 - static_cast<std::uint64_t>(capacity) + 4);
}

TEST_CASE("/dev/full: the error is named")
{
    const int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    auto sink = Sink::open(fd, "standard output", SpillPlace{});
    REQUIRE(sink);
    (*sink)->write("x");
    REQUIRE((*sink)->error());
    CHECK((*sink)->error()->message == "writing standard output: No space left on device");
    close(fd);
}

TEST_CASE("drain waits for the reader and stops for a stop signal")
{
    Pipe p;
    auto sink = Sink::open(p.w, "the pipe", SpillPlace{});
    REQUIRE(sink);
    (*sink)->write(pattern(1 << 20, 'd'));
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    REQUIRE(sigprocmask(SIG_BLOCK, &set, &old) == 0);
    const int sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    REQUIRE(sfd >= 0);
    raise(SIGHUP);
    Sink* const sinks[] = {sink->get()};
    const auto got = pto::output::drain(sinks, sfd, [sfd] {
        signalfd_siginfo info{};
        const bool one = read(sfd, &info, sizeof info) == static_cast<ssize_t>(sizeof info);
        return one ? static_cast<int>(info.ssi_signo) : 0;
    });
    close(sfd);
    REQUIRE(sigprocmask(SIG_SETMASK, &old, nullptr) == 0);
    REQUIRE(got);
    CHECK(*got == SIGHUP);
    CHECK((*sink)->pending() > 0);
}

}
