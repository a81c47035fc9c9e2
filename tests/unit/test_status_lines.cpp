#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "report/status_lines.hpp"

using namespace pto;

namespace {

// The lines, caught by the route; the sink (on /dev/null) is never written.
struct Caught {
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    std::unique_ptr<output::Sink> sink;
    std::string text;
    std::unique_ptr<report::StatusLines> lines;
    Caught()
    {
        REQUIRE(fd >= 0);
        auto s = output::Sink::open(fd, "standard error", SpillPlace{{}, true});
        REQUIRE(s);
        sink = std::move(*s);
        lines = std::make_unique<report::StatusLines>(*sink, 0);
        lines->set_route([this](std::string_view t, bool) { text += t; });
        lines->set_verdict_route([this](std::size_t, std::string_view t) { text += t; });
    }
    ~Caught() { close(fd); }
};

}  // namespace

TEST_SUITE("status_lines") {
TEST_CASE("a notice's control bytes are escaped, its lines kept")
{
    Caught c;
    c.lines->on_notice("srun: \x1epto-par-end 3\nsecond \x1b[31mline");
    CHECK(c.text == "[pto-par] srun: \\x1epto-par-end 3\nsecond \\x1b[31mline\n");
}

TEST_CASE("a try nothing planned for still counts: never attempt 2 of 1")
{
    Caught c;
    Job job;
    job.label = "j";
    JobResult r;
    r.status = JobStatus::flaky;
    r.attempts.push_back(Attempt{});
    c.lines->on_finish(job, r, JobOutput{});
    CHECK(c.text.find("attempt 2 of 2)") != std::string::npos);
    CHECK(c.text.find("of 1)") == std::string::npos);
}
}
