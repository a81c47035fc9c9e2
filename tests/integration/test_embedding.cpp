// run_jobs inside a program that has threads and signal handlers of its own,
// and what it hands such a program.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>
#include <thread>
#include <vector>

#include <pto/scheduler.hpp>

namespace {

pid_t caller_pid = 0;
volatile sig_atomic_t ran_in_child = 0;

void on_winch(int)
{
    // A vfork child shares our memory: this write is seen by the test.
    if (getpid() != caller_pid)
        ran_in_child = 1;
}

}  // namespace

TEST_SUITE("embedding") {

TEST_CASE("none of the caller's signal handlers runs in a job's child before it execs")
{
    caller_pid = getpid();
    // Our own process group: the flood below reaches us and, until they
    // leave it, the children we start, and nobody else.
    if (getpgrp() != getpid())
        REQUIRE(setpgid(0, 0) == 0);
    struct sigaction sa {};
    struct sigaction old {};
    sa.sa_handler = on_winch;
    REQUIRE(sigaction(SIGWINCH, &sa, &old) == 0);

    std::atomic<bool> stop{false};
    sigset_t all;
    sigset_t saved;
    sigfillset(&all);
    REQUIRE(pthread_sigmask(SIG_SETMASK, &all, &saved) == 0);
    std::thread flood([&stop] {
        const pid_t group = getpgrp();
        while (!stop.load(std::memory_order_relaxed))
            (void)kill(-group, SIGWINCH);
    });
    REQUIRE(pthread_sigmask(SIG_SETMASK, &saved, nullptr) == 0);

    std::vector<pto::Job> jobs;
    for (int i = 0; i < 200; ++i) {
        pto::Job job;
        job.label = "j" + std::to_string(i);
        job.device_count = 0;
        job.build = [](std::span<const int>) -> pto::Expected<pto::LaunchSpec> {
            return pto::LaunchSpec{{"/bin/true"}, {}, {}};
        };
        jobs.push_back(std::move(job));
    }
    pto::RunOptions opt;
    opt.max_parallel = 4;
    opt.handle_signals = false;
    // The vfork path: a child born in a cgroup (clone3) has a memory of its
    // own, where a stray handler would leave no trace for this test to see.
    opt.containment = pto::Containment::process_group;
    auto summary = pto::run_jobs(std::move(jobs), opt);
    stop = true;
    flood.join();
    REQUIRE(sigaction(SIGWINCH, &old, nullptr) == 0);

    REQUIRE(summary);
    CHECK(summary->containment == pto::Containment::process_group);
    CHECK(summary->withheld.empty());
    for (const auto& r : summary->results) {
        CHECK(r.status == pto::JobStatus::passed);
        // The reports' promise: the duration is exactly end - start.
        CHECK(r.duration_s == r.end - r.start);
    }
    CHECK(ran_in_child == 0);
}

TEST_CASE("watched signals reach the observer through the run's loop, and are the caller's again after it")
{
    struct Watcher final : pto::RunObserver {
        std::vector<int> got;
        void on_finish(const pto::Job&, const pto::JobResult&, const pto::JobOutput&) override {}
        void on_signal(int sig) override { got.push_back(sig); }
    } watcher;
    std::vector<pto::Job> jobs(1);
    jobs[0].label = "winch";
    jobs[0].device_count = 0;
    jobs[0].build = [](std::span<const int>) -> pto::Expected<pto::LaunchSpec> {
        // The job's parent is this process: the run's loop must read it.
        return pto::LaunchSpec{{"/bin/sh", "-c", "kill -WINCH $PPID; kill -WINCH $PPID; sleep 0.2"}, {}, {}};
    };
    pto::RunOptions opt;
    opt.handle_signals = false;
    opt.observer = &watcher;
    opt.watched_signals = {SIGWINCH};
    auto summary = pto::run_jobs(std::move(jobs), opt);
    REQUIRE_MESSAGE(summary, (summary ? "" : summary.error().message));
    CHECK(summary->results[0].status == pto::JobStatus::passed);
    // Standard signals do not queue: one or two, never none.
    REQUIRE(!watcher.got.empty());
    CHECK(watcher.got.size() <= 2);
    for (int sig : watcher.got)
        CHECK(sig == SIGWINCH);
    sigset_t now;
    REQUIRE(sigprocmask(SIG_BLOCK, nullptr, &now) == 0);
    CHECK(sigismember(&now, SIGWINCH) == 0);
}

namespace {

// A caller's signalfd as libptopar(3) asks for one: SIGINT, SIGTERM,
// SIGHUP and SIGUSR1 blocked and in its mask.
struct CallerSignals {
    sigset_t set{}, before{};
    int fd = -1;
    CallerSignals()
    {
        sigemptyset(&set);
        for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1})
            sigaddset(&set, sig);
        REQUIRE(sigprocmask(SIG_BLOCK, &set, &before) == 0);
        fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
        REQUIRE(fd >= 0);
    }
    ~CallerSignals()
    {
        // What is still pending goes before the mask does.
        timespec none{};
        while (sigtimedwait(&set, nullptr, &none) > 0) {
        }
        close(fd);
        sigprocmask(SIG_SETMASK, &before, nullptr);
    }
    // The signal read from the caller's descriptor now, 0 if none.
    int read_one() const
    {
        signalfd_siginfo info{};
        return read(fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info) ? static_cast<int>(info.ssi_signo) : 0;
    }
};

std::vector<pto::Job> one_job(const char* script)
{
    pto::Job job;
    job.label = "one";
    job.device_count = 0;
    job.build = [script](std::span<const int>) -> pto::Expected<pto::LaunchSpec> {
        return pto::LaunchSpec{{"/bin/sh", "-c", script}, {}, {}};
    };
    std::vector<pto::Job> jobs;
    jobs.push_back(std::move(job));
    return jobs;
}

struct StatusCounter final : pto::RunObserver {
    int reports = 0;
    void on_finish(const pto::Job&, const pto::JobResult&, const pto::JobOutput&) override {}
    void on_status(const pto::StatusReport&) override { ++reports; }
};

}  // namespace

TEST_CASE("a caller's signalfd lent to the run still reads the caller's stop signals after it")
{
    CallerSignals caller;
    StatusCounter counter;
    pto::RunOptions opt;
    opt.signal_fd = caller.fd;
    opt.observer = &counter;
    auto summary = pto::run_jobs(one_job("kill -USR1 $PPID; sleep 0.2"), opt);
    REQUIRE_MESSAGE(summary, (summary ? "" : summary.error().message));
    CHECK(counter.reports == 1);
    REQUIRE(raise(SIGINT) == 0);
    CHECK(caller.read_one() == SIGINT);
}

TEST_CASE("without handle_signals the run leaves a lent signalfd alone: a status request stays the caller's")
{
    CallerSignals caller;
    StatusCounter counter;
    pto::RunOptions opt;
    opt.handle_signals = false;
    opt.signal_fd = caller.fd;
    opt.observer = &counter;
    auto summary = pto::run_jobs(one_job("kill -USR1 $PPID; sleep 0.2"), opt);
    REQUIRE_MESSAGE(summary, (summary ? "" : summary.error().message));
    CHECK(summary->results[0].status == pto::JobStatus::passed);
    CHECK(counter.reports == 0);
    CHECK(caller.read_one() == SIGUSR1);
}

namespace {

// What on_finish shows of each job's output.
struct Seen {
    std::uint64_t size = 0;
    std::uint64_t discarded = 0;
    std::size_t kept = 0;
    bool spilled = false;
    std::string tail;
};

class Watcher final : public pto::RunObserver {
public:
    std::vector<Seen> seen;
    void on_finish(const pto::Job&, const pto::JobResult&, const pto::JobOutput& output) override
    {
        seen.push_back({output.size(), output.discarded(), output.memory().size(), output.spilled(), output.tail(16)});
    }
};

std::vector<pto::Job> chatty_job()
{
    pto::Job job;
    job.label = "chatty";
    job.device_count = 0;
    job.build = [](std::span<const int>) -> pto::Expected<pto::LaunchSpec> {
        return pto::LaunchSpec{{"/bin/sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo LAST"}, {}, {}};
    };
    std::vector<pto::Job> jobs;
    jobs.push_back(std::move(job));
    return jobs;
}

}  // namespace

TEST_CASE("without whole_output a job keeps the end of its output, in memory, and loses nothing")
{
    Watcher watcher;
    pto::RunOptions opt;
    opt.handle_signals = false;
    opt.whole_output = false;
    opt.observer = &watcher;
    auto summary = pto::run_jobs(chatty_job(), opt);
    REQUIRE(summary);
    REQUIRE(summary->results.size() == 1);
    const auto& r = summary->results[0];
    CHECK(r.status == pto::JobStatus::passed);
    CHECK(r.output_lost == 0);
    CHECK(r.error.empty());
    REQUIRE(watcher.seen.size() == 1);
    const Seen& s = watcher.seen[0];
    CHECK(s.size == 3000006);
    CHECK_FALSE(s.spilled);
    CHECK(s.discarded + s.kept == s.size);
    CHECK(s.kept < 2 * opt.output_memory_limit);
    CHECK(s.tail == "xxxxxxxxxx\nLAST\n");
}

TEST_CASE("keep_output asks for the whole output, whole_output or not")
{
    Watcher watcher;
    pto::RunOptions opt;
    opt.handle_signals = false;
    opt.whole_output = false;
    opt.keep_output = true;
    opt.observer = &watcher;
    auto summary = pto::run_jobs(chatty_job(), opt);
    REQUIRE(summary);
    const auto& r = summary->results[0];
    CHECK(r.status == pto::JobStatus::passed);
    CHECK(r.output == std::string(3000000, 'x') + "\nLAST\n");
    REQUIRE(watcher.seen.size() == 1);
    CHECK(watcher.seen[0].discarded == 0);
    CHECK(watcher.seen[0].spilled);
}

}
