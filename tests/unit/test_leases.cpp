#include <doctest/doctest.h>

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>

#include "devices/leases.hpp"
#include "scratch_dir.hpp"

using namespace pto::leases;

namespace {

bool readable(int fd, int timeout_ms)
{
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, timeout_ms) == 1;
}

LockDir open_dir(const std::string& path)
{
    auto d = LockDir::open(path);
    REQUIRE(d);
    return std::move(*d);
}

}  // namespace

TEST_SUITE("leases") {

TEST_CASE("lease names: an identity is one file name, a UUID stays readable")
{
    CHECK(device_key("3") == "device-3");
    CHECK(device_key("GPU-8f2a-11") == "device-GPU-8f2a-11");
    CHECK(device_key("MIG/1:2") == "device-MIG%2F1%3A2");
    CHECK(device_key("..") == "device-..");
    CHECK(port_key(40000) == "port-40000");
}

TEST_CASE("--lock-dir over $PTO_PAR_LOCK_DIR over the default; none turns leases off")
{
    CHECK(**choose_lock_dir(std::string("/x"), "/y") == "/x");
    CHECK(**choose_lock_dir(std::nullopt, "/y") == "/y");
    CHECK(choose_lock_dir(std::nullopt, nullptr)->value().empty());
    CHECK_FALSE(*choose_lock_dir(std::string("none"), "/y"));
    CHECK_FALSE(*choose_lock_dir(std::nullopt, "none"));
    CHECK(choose_lock_dir(std::string(), nullptr).error().message.find("--lock-dir") != std::string::npos);
    CHECK(choose_lock_dir(std::nullopt, "").error().message.find("PTO_PAR_LOCK_DIR") != std::string::npos);
}

TEST_CASE("a lock directory is made sticky and writable by all, whatever the umask")
{
    pto::test::ScratchDir scratch("leases");
    const std::string path = scratch.path().string() + "/locks";
    const mode_t old = umask(077);
    auto d = LockDir::open(path);
    umask(old);
    REQUIRE(d);
    struct stat st {};
    REQUIRE(stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 01777);
    CHECK_FALSE(LockDir::open(scratch.path().string() + "/no/such/parent"));
}

TEST_CASE("two holders: all or none, the busy one named with its holder's pid, a failed try wakes nobody")
{
    pto::test::ScratchDir scratch("leases");
    auto a = open_dir(scratch.path().string());
    auto b = open_dir(scratch.path().string());
    const std::vector<std::string> first{device_key("0"), port_key(40000)};
    auto held = a.try_take(first);
    REQUIRE(held);
    REQUIRE(std::holds_alternative<std::vector<Lease>>(*held));

    const std::vector<std::string> wide{device_key("1"), device_key("0")};
    auto busy = b.try_take(wide);
    REQUIRE(busy);
    REQUIRE(std::holds_alternative<Busy>(*busy));
    CHECK(std::get<Busy>(*busy).key == device_key("0"));
    CHECK(std::get<Busy>(*busy).holder.pid == getpid());
    CHECK_FALSE(std::get<Busy>(*busy).holder.elsewhere);
    CHECK(b.last_holder(device_key("0"))->pid == getpid());
    // device-1 was given back: a third holder gets it.
    auto c = open_dir(scratch.path().string());
    const std::vector<std::string> one{device_key("1")};
    auto third = c.try_take(one);
    REQUIRE(third);
    CHECK(std::holds_alternative<std::vector<Lease>>(*third));
    // Nothing was closed by the tries that failed: nothing to try again
    // for (the claim made is an event, but not a lease given back).
    b.drain();
    auto again = b.try_take(wide);
    REQUIRE(again);
    CHECK(std::holds_alternative<Busy>(*again));
    CHECK_FALSE(b.drain());

    // Giving a lease back is the event that wakes the waiter.
    int woken = 0;
    b.on_freed([&woken] { ++woken; });
    third->emplace<Busy>();
    REQUIRE(readable(b.poll_fd(), 1000));
    b.on_ready(POLLIN);
    CHECK(woken == 1);
    held->emplace<Busy>();
    REQUIRE(readable(b.poll_fd(), 1000));
    auto now = b.try_take(wide);
    REQUIRE(now);
    CHECK(std::holds_alternative<std::vector<Lease>>(*now));
}

TEST_CASE("a lease given back while another holder waits for it is left to that holder")
{
    pto::test::ScratchDir scratch("leases");
    auto a = open_dir(scratch.path().string());
    auto b = open_dir(scratch.path().string());
    const std::vector<std::string> key{device_key("0")};
    auto held = a.try_take(key);
    REQUIRE(held);
    REQUIRE(std::holds_alternative<std::vector<Lease>>(*held));
    // b waits for it: held, and b says it waits.
    auto busy = b.try_take(key);
    REQUIRE(busy);
    REQUIRE(std::holds_alternative<Busy>(*busy));
    CHECK_FALSE(std::get<Busy>(*busy).yielded);
    held->emplace<Busy>();
    // Free now, but a is not the one waiting: it leaves it to b.
    auto yielded = a.try_take(key);
    REQUIRE(yielded);
    REQUIRE(std::holds_alternative<Busy>(*yielded));
    CHECK(std::get<Busy>(*yielded).yielded);
    b.drain();
    a.drain();
    auto taken = b.try_take(key);
    REQUIRE(taken);
    REQUIRE(std::holds_alternative<std::vector<Lease>>(*taken));
    // b waits no more, which wakes a; then it is plainly b's.
    CHECK(readable(a.poll_fd(), 1000));
    auto after = a.try_take(key);
    REQUIRE(after);
    REQUIRE(std::holds_alternative<Busy>(*after));
    CHECK_FALSE(std::get<Busy>(*after).yielded);
    CHECK(std::get<Busy>(*after).holder.pid == getpid());
    // Given back with a now waiting: b leaves it to a, and a takes it.
    taken->emplace<Busy>();
    auto b_again = b.try_take(key);
    REQUIRE(b_again);
    CHECK(std::holds_alternative<Busy>(*b_again));
    auto a_again = a.try_take(key);
    REQUIRE(a_again);
    CHECK(std::holds_alternative<std::vector<Lease>>(*a_again));
    // b waits for it again, then has nothing left to wait for: a, giving
    // it back, may take it again.
    auto b_waits = b.try_take(key);
    REQUIRE(b_waits);
    REQUIRE(std::holds_alternative<Busy>(*b_waits));
    CHECK_FALSE(std::get<Busy>(*b_waits).yielded);
    a_again->emplace<Busy>();
    b.stop_waiting();
    auto a_third = a.try_take(key);
    REQUIRE(a_third);
    CHECK(std::holds_alternative<std::vector<Lease>>(*a_third));
}

TEST_CASE("a nested run's inherited leases are taken at once though the outer run holds them")
{
    pto::test::ScratchDir scratch("leases");
    auto outer = open_dir(scratch.path().string());
    const std::vector<std::string> job{device_key("2"), port_key(40010)};
    auto held = outer.try_take(job);
    REQUIRE(held);
    REQUIRE(std::holds_alternative<std::vector<Lease>>(*held));
    auto inner = open_dir(scratch.path().string());
    inner.inherit(job);
    auto got = inner.try_take(job);
    REQUIRE(got);
    REQUIRE(std::holds_alternative<std::vector<Lease>>(*got));
    for (const auto& l : std::get<std::vector<Lease>>(*got))
        CHECK(l.inherited());
    // Not inherited: still busy.
    const std::vector<std::string> other{device_key("3")};
    auto outer_other = outer.try_take(other);
    REQUIRE(outer_other);
    auto busy = inner.try_take(other);
    REQUIRE(busy);
    CHECK(std::holds_alternative<Busy>(*busy));
}

TEST_CASE("a holder killed with SIGKILL: the kernel gives its lease back and the waiter is woken")
{
    pto::test::ScratchDir scratch("leases");
    const std::string path = scratch.path().string();
    const std::vector<std::string> keys{device_key("GPU-abc"), port_key(40020)};
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        auto d = LockDir::open(path);
        if (!d)
            _exit(1);
        auto held = d->try_take(keys);
        if (!held || !std::holds_alternative<std::vector<Lease>>(*held))
            _exit(1);
        (void)!write(ready[1], "x", 1);
        pause();
        _exit(0);
    }
    close(ready[1]);
    char c = 0;
    REQUIRE(read(ready[0], &c, 1) == 1);
    close(ready[0]);
    auto waiter = open_dir(path);
    auto busy = waiter.try_take(keys);
    REQUIRE(busy);
    REQUIRE(std::holds_alternative<Busy>(*busy));
    CHECK(std::get<Busy>(*busy).holder.pid == child);
    CHECK_FALSE(waiter.drain());
    kill(child, SIGKILL);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(readable(waiter.poll_fd(), 2000));
    CHECK(waiter.drain());
    auto got = waiter.try_take(keys);
    REQUIRE(got);
    CHECK(std::holds_alternative<std::vector<Lease>>(*got));
}

TEST_CASE("a nested run inherits its job's devices by identity and its ports, and nothing outside a job")
{
    std::map<std::string, std::string> env{{"PTO_PAR_DEVICES", "2,3"}, {"PTO_PAR_DEVICE_NAMES", ""},
                                           {"PTO_PAR_PORTS", "40000-40002"}};
    const auto get = [&env](const char* name) -> const char* {
        const auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    };
    CHECK(inherited_from(get).devices.empty());
    env["PTO_PAR_SEQ"] = "4";
    auto got = inherited_from(get);
    CHECK(got.devices == std::vector<std::string>{"2", "3"});
    CHECK(got.ports == std::vector<int>{40000, 40001, 40002});
    env["PTO_PAR_DEVICE_NAMES"] = "GPU-a,GPU-b";
    env["PTO_PAR_PORTS"] = "40000-x";
    got = inherited_from(get);
    CHECK(got.devices == std::vector<std::string>{"GPU-a", "GPU-b"});
    CHECK(got.ports.empty());
}

}  // TEST_SUITE

TEST_SUITE("leases") {

TEST_CASE("a held lease whose file is removed, or whose directory is, is locked again under its name")
{
    pto::test::ScratchDir scratch("leases");
    const std::string path = scratch.path().string() + "/locks";
    auto a = open_dir(path);
    auto b = open_dir(path);
    const std::vector<std::string> key{device_key("0")};
    auto held = a.try_take(key);
    REQUIRE(held);
    REQUIRE(std::holds_alternative<std::vector<Lease>>(*held));
    for (const bool whole_dir : {false, true}) {
        REQUIRE(unlink((path + "/device-0").c_str()) == 0);
        if (whole_dir)
            REQUIRE(rmdir(path.c_str()) == 0);  // empty now: a's claims are none
        REQUIRE(readable(a.poll_fd(), 1000));
        a.drain();
        auto other = b.try_take(key);
        REQUIRE(other);
        CHECK_MESSAGE(std::holds_alternative<Busy>(*other), "whole dir: " << whole_dir);
        b.stop_waiting();
    }
}

}
