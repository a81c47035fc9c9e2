#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <string>

#include "common/text.hpp"
#include "output/sink.hpp"
#include "report/progress_line.hpp"

using pto::report::format_progress;
using pto::report::Progress;

namespace {

Progress running(std::vector<std::string> labels, std::size_t done = 12, std::size_t total = 80)
{
    Progress p;
    p.done = done;
    p.total = total;
    p.running = std::move(labels);
    p.elapsed_s = 134.9;
    return p;
}

std::string drain(int fd)
{
    std::string got;
    char buf[4096];
    pollfd p{fd, POLLIN, 0};
    while (poll(&p, 1, 0) > 0) {
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            break;
        got.append(buf, static_cast<std::size_t>(n));
    }
    return got;
}

}  // namespace

TEST_SUITE("progress_line") {

TEST_CASE("the line: done/total, what runs in start order, failures, the clock")
{
    auto p = running({"allreduce", "test_mul.py", "x"});
    CHECK(format_progress(p, 200) == "[12/80] 3 running: allreduce, test_mul.py, x \xC2\xB7 2:14");
    p.failed = 1;
    CHECK(format_progress(p, 200) == "[12/80] 3 running: allreduce, test_mul.py, x \xC2\xB7 1 failed \xC2\xB7 2:14");
    p.sick = {1, 2, 5};
    CHECK(format_progress(p, 200) ==
          "[12/80] 3 running: allreduce, test_mul.py, x \xC2\xB7 1 failed \xC2\xB7 sick: 1,2,5 \xC2\xB7 2:14");
    p.sick_on_nodes = {"n2:1", "n1:0"};
    CHECK(format_progress(p, 200).find("sick: 1,2,5 \xC2\xB7 sick: n2:1 n1:0 \xC2\xB7 2:14") != std::string::npos);
    p.sick_on_nodes.clear();
    p.waiting = "y waits for device 0 (held by another run, pid 42)";
    CHECK(format_progress(p, 200) == "[12/80] 3 running: allreduce, test_mul.py, x \xC2\xB7 1 failed \xC2\xB7 sick: "
                                     "1,2,5 \xC2\xB7 y waits for device 0 (held by another run, pid 42) \xC2\xB7 2:14");
    p.waiting.clear();
    p.elapsed_s = 3 * 3600 + 62;
    CHECK(format_progress(p, 200).ends_with("3:01:02"));
    CHECK(format_progress(running({}, 80, 80), 200) == "[80/80] 0 running \xC2\xB7 2:14");
    auto s = running({"a"});
    s.stopping = "interrupted";
    CHECK(format_progress(s, 200) == "[12/80] stopping (interrupted): 1 running: a \xC2\xB7 2:14");
}

TEST_CASE("labels that do not fit become one ellipsis; the counts and the clock stay")
{
    const auto p = running({"allreduce", "test_mul.py", "test_conv2d_backward"});
    // "[12/80] 3 running: allreduce, test_mul.py, … · 2:14" is 51 columns.
    CHECK(format_progress(p, 51) == "[12/80] 3 running: allreduce, test_mul.py, \xE2\x80\xA6 \xC2\xB7 2:14");
    CHECK(format_progress(p, 40) == "[12/80] 3 running: allreduce, \xE2\x80\xA6 \xC2\xB7 2:14");
    CHECK(format_progress(p, 28) == "[12/80] 3 running: \xE2\x80\xA6 \xC2\xB7 2:14");
    for (std::size_t w = 1; w < 90; ++w)
        CHECK(pto::text::columns(format_progress(p, w)) <= w);
    // Too narrow even for the counts: cut, and the cut shown.
    CHECK(format_progress(p, 10) == "[12/80] 3\xE2\x80\xA6");
}

TEST_CASE("wide labels are counted in columns, not bytes")
{
    const auto p = running({"\xE6\xB5\x8B\xE8\xAF\x95", "b"});  // 测试: 4 columns
    const auto line = format_progress(p, 200);
    CHECK(line == "[12/80] 2 running: \xE6\xB5\x8B\xE8\xAF\x95, b \xC2\xB7 2:14");
    CHECK(pto::text::columns(line) == 19 + 4 + 3 + 7);
    for (std::size_t w = 1; w < 40; ++w)
        CHECK(pto::text::columns(format_progress(p, w)) <= w);
}

TEST_CASE("ProgressLine: drawn in place, taken away before any other write, gone at the end")
{
    int fds[2];
    REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
    auto sink = pto::output::Sink::open(fds[1], "test", pto::SpillPlace{{}, true});
    REQUIRE(sink);
    auto line = pto::report::ProgressLine::open(**sink, nullptr, fds[1], 2);
    REQUIRE(line);
    pto::Job job;
    pto::JobResult r;
    r.index = 0;
    r.label = "first";
    (*line)->on_start(job, r);
    (*line)->on_ready(POLLIN);
    const std::string drawn = drain(fds[0]);
    CHECK(drawn.starts_with("\r[0/2] 1 running: first \xC2\xB7 0:0"));
    CHECK(drawn.ends_with("\x1b[K"));
    (*sink)->write("a line\n");
    CHECK(drain(fds[0]) == "\r\x1b[K" "a line\n");
    (*sink)->write("another\n");  // already away: not erased twice
    CHECK(drain(fds[0]) == "another\n");
    r.status = pto::JobStatus::failed;
    (*line)->on_finish(job, r, pto::JobOutput());
    (*line)->on_ready(POLLIN);
    CHECK(drain(fds[0]).starts_with("\r[1/2] 0 running \xC2\xB7 1 failed"));
    (*line)->finish();
    CHECK(drain(fds[0]) == "\r\x1b[K");
    (*sink)->write("after\n");
    CHECK(drain(fds[0]) == "after\n");
    line->reset();
    sink->reset();
    close(fds[0]);
    close(fds[1]);
}

}
