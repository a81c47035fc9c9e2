// JobOutput::tail_only: the end of an output nobody reads whole, in bounded
// memory and never on disk.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include <pto/job_output.hpp>

using pto::JobOutput;

namespace {

constexpr std::size_t tail_bytes = 64 * 1024;  // what tail() and the TIMEOUT report show at most

// Lines of varying length with their number in them, so that any shifted
// or missing byte shows.
std::string numbered_lines(std::size_t size)
{
    std::string s;
    s.reserve(size + 64);
    for (std::size_t i = 0; s.size() < size; ++i)
        s += "line " + std::to_string(i) + std::string(i % 97, '.') + "\n";
    s.resize(size);
    return s;
}

// The output fed in pieces of every kind of size: bytes, lines, more than
// the tail, more than the memory limit.
void feed(JobOutput& out, const std::string& all, unsigned seed)
{
    std::mt19937 rng(seed);
    const std::size_t sizes[] = {1, 7, 128, 4096, tail_bytes - 1, tail_bytes, tail_bytes + 1, 300000, 1 << 20};
    for (std::size_t at = 0; at < all.size();) {
        const std::size_t n = std::min(all.size() - at, sizes[rng() % std::size(sizes)]);
        out.append(std::string_view(all).substr(at, n));
        at += n;
    }
}

void check_tail(const JobOutput& out, const std::string& all, std::size_t memory_limit)
{
    CHECK(out.size() == all.size());
    CHECK(out.dropped() == 0);
    CHECK_FALSE(out.error());
    CHECK_FALSE(out.spilled());
    CHECK(out.spill_fd() < 0);
    // What is kept is the end of the output, at least the tail and never
    // more than memory may hold.
    const std::string_view kept = out.memory();
    CHECK(out.discarded() + kept.size() == all.size());
    CHECK(kept.size() >= std::min(all.size(), tail_bytes));
    CHECK(kept.size() <= std::max(memory_limit, 2 * tail_bytes));
    CHECK(std::string_view(all).substr(all.size() - kept.size()) == kept);
    CHECK(out.tail(tail_bytes) == all.substr(all.size() - std::min(all.size(), tail_bytes)));
    CHECK(out.tail(10) == all.substr(all.size() - std::min<std::size_t>(all.size(), 10)));
    const auto str = out.str();
    REQUIRE(str);
    CHECK(*str == kept);
}

// A job writing `all` to the non-blocking pipe end `w` in pieces of 5000
// bytes, then closing it.
std::thread write_in_pieces(int w, const std::string& all)
{
    return std::thread([w, &all] {
        std::size_t at = 0;
        while (at < all.size()) {
            const ssize_t n = write(w, all.data() + at, std::min<std::size_t>(all.size() - at, 5000));
            if (n > 0)
                at += static_cast<std::size_t>(n);
            else
                usleep(100);  // EAGAIN: the reader is behind
        }
        close(w);
    });
}

}  // namespace

TEST_SUITE("job_output") {

TEST_CASE("tail_only keeps everything while it fits in memory")
{
    auto out = JobOutput::tail_only(1 << 20);
    const std::string all = numbered_lines(900000);
    feed(out, all, 1);
    CHECK(out.discarded() == 0);
    CHECK(out.size() == all.size());
    const auto str = out.str();
    REQUIRE(str);
    CHECK(*str == all);
}

TEST_CASE("past the memory limit tail_only keeps the last bytes, whatever the pieces")
{
    const std::string all = numbered_lines(9 << 20);
    for (const std::size_t limit : {std::size_t{16}, tail_bytes, std::size_t{1} << 20}) {
        for (unsigned seed = 1; seed <= 4; ++seed) {
            CAPTURE(limit);
            CAPTURE(seed);
            auto out = JobOutput::tail_only(limit);
            feed(out, all, seed);
            CHECK(out.discarded() > 0);
            check_tail(out, all, limit);
            std::string whole_last = all;
            if (whole_last.back() == '\n')
                whole_last.pop_back();
            whole_last.erase(0, whole_last.rfind('\n') + 1);
            CHECK(out.last_line() == whole_last);
        }
    }
}

TEST_CASE("a pipe read into a tail_only output: every byte seen live, the end kept, nothing on disk")
{
    const std::string all = numbered_lines(6 << 20);
    for (const bool live : {true, false}) {
        CAPTURE(live);
        int fds[2];
        REQUIRE(pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0);
        std::thread writer = write_in_pieces(fds[1], all);
        auto out = JobOutput::tail_only(1 << 20);
        std::string seen;
        const std::function<void(std::string_view)> watch = [&seen](std::string_view b) { seen.append(b); };
        for (;;) {
            const auto got = out.take_from_pipe(fds[0], 1 << 20, live ? watch : nullptr);
            if (got.eof)
                break;
            if (got.bytes == 0)
                usleep(100);
        }
        writer.join();
        close(fds[0]);
        if (live)
            CHECK(seen == all);
        check_tail(out, all, 1 << 20);
    }
}

TEST_CASE("passing on: every byte reaches a pipe or a file as it was written, the end is kept")
{
    const std::string before = numbered_lines(300000);  // kept whole before the passage, then cut to its end
    const std::string all = numbered_lines(6 << 20);
    for (const bool to_pipe : {true, false}) {
        CAPTURE(to_pipe);
        int job[2];
        REQUIRE(pipe2(job, O_CLOEXEC | O_NONBLOCK) == 0);
        int target[2] = {-1, -1};
        char file_name[] = "/tmp/pto-par-pass-test.XXXXXX";
        int file = -1;
        std::string received;
        std::thread reader;
        if (to_pipe) {
            REQUIRE(pipe2(target, O_CLOEXEC | O_NONBLOCK) == 0);
            reader = std::thread([r = target[0], &received] {
                char buf[65536];
                for (;;) {
                    const ssize_t n = read(r, buf, sizeof buf);
                    if (n > 0)
                        received.append(buf, static_cast<std::size_t>(n));
                    else if (n == 0)
                        break;
                    else
                        usleep(100);  // EAGAIN
                }
            });
        } else {
            file = mkstemp(file_name);
            REQUIRE(file >= 0);
            unlink(file_name);
        }
        std::thread writer = write_in_pieces(job[1], all);
        auto out = JobOutput::reserve(pto::SpillPlace{});
        REQUIRE(out);
        out->append(before);
        const JobOutput::Passage passage{to_pipe ? target[1] : file, to_pipe, true};
        out->keep_end_only();
        // As the runner does: to a file, what comes before the end is
        // spliced and the end is read and written behind it.
        const std::function<void(std::string_view)> write_on = [file](std::string_view b) {
            REQUIRE(write(file, b.data(), b.size()) == static_cast<ssize_t>(b.size()));
        };
        for (;;) {
            JobOutput::Taken got;
            if (to_pipe) {
                got = out->pass_from_pipe(job[0], 1 << 20, passage);
            } else {
                CHECK(out->pass_before_end(job[0], passage));
                got = out->take_from_pipe(job[0], 1 << 20, write_on);
            }
            if (got.eof)
                break;
            if (got.bytes == 0)
                usleep(100);  // nothing in the job's pipe, or a full target
        }
        writer.join();
        close(job[0]);
        if (to_pipe) {
            close(target[1]);
            reader.join();
            CHECK(received.size() == all.size());
            CHECK(received == all);
        } else {
            std::string got(all.size() + 1, '\0');
            CHECK(pread(file, got.data(), got.size(), 0) == static_cast<ssize_t>(all.size()));
            got.resize(all.size());
            CHECK(got == all);
            close(file);
        }
        out->settle();
        const std::string whole = before + all;
        CHECK(out->size() == whole.size());
        CHECK_FALSE(out->spilled());
        CHECK(out->tail(tail_bytes) == whole.substr(whole.size() - tail_bytes));
    }
}

TEST_CASE("to a file only the bytes before the end are spliced; the end stays in the job's pipe to be read")
{
    // Kept by a tee instead, each page would stay shared with a pipe of
    // pto-par's and the job would pay a fresh one for every write.
    int job[2];
    REQUIRE(pipe2(job, O_CLOEXEC | O_NONBLOCK) == 0);
    REQUIRE(fcntl(job[1], F_SETPIPE_SZ, 1 << 20) >= 300000);
    char file_name[] = "/tmp/pto-par-pass-end-test.XXXXXX";
    const int file = mkstemp(file_name);
    REQUIRE(file >= 0);
    unlink(file_name);
    auto out = JobOutput::reserve(pto::SpillPlace{});
    REQUIRE(out);
    // Printed before the block went live: the bytes passed on come between
    // it and the end read, so it is no longer part of that end.
    const std::string before = "printed before, no newline";
    out->append(before);
    const std::string all = numbered_lines(300000);
    REQUIRE(write(job[1], all.data(), all.size()) == static_cast<ssize_t>(all.size()));
    const JobOutput::Passage passage{file, false, true};
    CHECK(out->pass_before_end(job[0], passage));
    int left = 0;
    REQUIRE(ioctl(job[0], FIONREAD, &left) == 0);
    CHECK(left == static_cast<int>(tail_bytes));
    CHECK(lseek(file, 0, SEEK_CUR) == static_cast<off_t>(all.size() - tail_bytes));
    // Only a little: nothing before the end to pass on.
    CHECK(out->pass_before_end(job[0], passage));
    REQUIRE(ioctl(job[0], FIONREAD, &left) == 0);
    CHECK(left == static_cast<int>(tail_bytes));
    std::string shown;
    const auto got = out->take_from_pipe(job[0], 1 << 20, [&shown](std::string_view b) { shown.append(b); });
    CHECK(got.bytes == tail_bytes);
    CHECK(shown == all.substr(all.size() - tail_bytes));
    CHECK(out->size() == before.size() + all.size());
    CHECK(out->memory() == all.substr(all.size() - tail_bytes));
    CHECK(out->tail(tail_bytes) == all.substr(all.size() - tail_bytes));
    std::string in_file(all.size(), '\0');
    CHECK(pread(file, in_file.data(), in_file.size(), 0) == static_cast<ssize_t>(all.size() - tail_bytes));
    CHECK(in_file.substr(0, all.size() - tail_bytes) == all.substr(0, all.size() - tail_bytes));
    for (int fd : {job[0], job[1], file})
        close(fd);
}

TEST_CASE("bytes read after bytes passed come after them in the end kept")
{
    int job[2], target[2];
    REQUIRE(pipe2(job, O_CLOEXEC | O_NONBLOCK) == 0);
    REQUIRE(pipe2(target, O_CLOEXEC | O_NONBLOCK) == 0);
    auto out = JobOutput::reserve(pto::SpillPlace{});
    REQUIRE(out);
    REQUIRE(write(job[1], "passed,", 7) == 7);
    const auto passed = out->pass_from_pipe(job[0], 1 << 20, JobOutput::Passage{target[1], true, true});
    CHECK(passed.bytes == 7);
    // The target takes no more now (as a slow reader's would): read instead.
    REQUIRE(write(job[1], "read", 4) == 4);
    const auto taken = out->take_from_pipe(job[0], 1 << 20, nullptr);
    CHECK(taken.bytes == 4);
    out->settle();
    CHECK(out->size() == 11);
    CHECK(out->tail(64) == "passed,read");
    for (int fd : {job[0], job[1], target[0], target[1]})
        close(fd);
}

}
