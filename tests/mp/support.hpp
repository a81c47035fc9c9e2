// Helpers shared by the pto::mp tests.
#pragma once

#include <doctest/doctest.h>
#include <pto/mp.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <string>

namespace mp_test {

// what() of the SpawnError a spawn throws, or "" when it completes.
inline std::string spawn_failure(std::function<void(int)> fn, int nprocs, pto::mp::SpawnOptions options = {})
{
    try {
        pto::mp::spawn(std::move(fn), nprocs, options);
    } catch (const pto::mp::SpawnError& e) {
        return e.what();
    }
    return "";
}

inline bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

// Counts its own destructions, to show that a rank's stack was unwound.
struct Tracked {
    explicit Tracked(int& destroyed) : destroyed_(destroyed) {}
    Tracked(const Tracked&) = delete;
    Tracked& operator=(const Tracked&) = delete;
    ~Tracked() { ++destroyed_; }

private:
    int& destroyed_;
};

// How a child ended, and what it wrote to stderr.
struct Death {
    int status = 0;
    std::string stderr_text;
};

// Runs body in a child whose stderr is captured; it exits 0 if body returns.
inline Death in_child(const std::function<void()>& body)
{
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        body();
        _exit(0);
    }
    close(fds[1]);
    Death death;
    char buffer[512];
    ssize_t n = 0;
    while ((n = read(fds[0], buffer, sizeof buffer)) != 0) {
        if (n < 0 && errno == EINTR) continue;
        REQUIRE(n > 0);
        death.stderr_text.append(buffer, static_cast<std::size_t>(n));
    }
    close(fds[0]);
    while (waitpid(pid, &death.status, 0) < 0) REQUIRE(errno == EINTR);
    return death;
}

}  // namespace mp_test
