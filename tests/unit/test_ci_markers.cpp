#include <doctest/doctest.h>

#include "report/ci_markers.hpp"

using namespace pto::report;

namespace {

pto::Job job_named(const std::string& label, std::size_t seq)
{
    pto::Job j;
    j.label = label;
    j.seq = seq;
    return j;
}

}  // namespace

TEST_SUITE("ci_markers") {

TEST_CASE("GitHub's escaping: data escapes % CR LF, properties also : and ,")
{
    CHECK(github_escape_data("50% done\r\nnext::x,y") == "50%25 done%0D%0Anext::x,y");
    CHECK(github_escape_property("50% done\r\nnext::x,y") == "50%25 done%0D%0Anext%3A%3Ax%2Cy");
}

TEST_CASE("CI detection: only the exact value each CI sets")
{
    CHECK(detect_ci("true", nullptr) == CiKind::github);
    CHECK(detect_ci(nullptr, "true") == CiKind::gitlab);
    CHECK(detect_ci("1", nullptr) == CiKind::none);
    CHECK(detect_ci(nullptr, nullptr) == CiKind::none);
}

TEST_CASE("groups: GitHub's ::group:: with commands stopped inside, GitLab's sections folded for passed jobs only")
{
    const auto job = job_named("a::b", 7);
    pto::JobResult passed;
    passed.status = pto::JobStatus::passed;
    pto::JobResult failed;
    failed.status = pto::JobStatus::failed;
    const std::string token = "0123456789abcdef0123456789abcdef";
    CHECK(group_begin(CiKind::github, job, passed, 1, token) == "::group::PASS a::b\n::stop-commands::" + token + "\n");
    CHECK(group_end(CiKind::github, job, 2, token) == "::" + token + "::\n::endgroup::\n");
    CHECK(group_begin(CiKind::gitlab, job, passed, 1, token) ==
          "\x1b[0Ksection_start:1:pto_par_" + token + "_7[collapsed=true]\r\x1b[0KPASS a::b\n");
    CHECK(group_begin(CiKind::gitlab, job, failed, 1, token) ==
          "\x1b[0Ksection_start:1:pto_par_" + token + "_7\r\x1b[0KFAIL a::b\n");
    CHECK(group_end(CiKind::gitlab, job, 2, token) == "\x1b[0Ksection_end:2:pto_par_" + token + "_7\r\x1b[0K\n");
    CHECK(group_begin(CiKind::none, job, passed, 1, token).empty());
    // A live block's start, before the verdict: the label alone, never folded.
    CHECK(live_group_begin(CiKind::github, job, 1, token) == "::group::a::b\n::stop-commands::" + token + "\n");
    CHECK(live_group_begin(CiKind::gitlab, job, 1, token) ==
          "\x1b[0Ksection_start:1:pto_par_" + token + "_7\r\x1b[0Ka::b\n");
}

TEST_CASE("a run's token: 128 random bits in hex, another each time")
{
    const auto a = random_token();
    const auto b = random_token();
    REQUIRE(a);
    REQUIRE(b);
    CHECK(a->size() == 32);
    CHECK(a->find_first_not_of("0123456789abcdef") == std::string::npos);
    CHECK(*a != *b);
}

TEST_CASE("an annotation for each job that did not pass, none for one that did")
{
    pto::JobResult r;
    r.label = "all%reduce:x";
    r.status = pto::JobStatus::failed;
    r.exit_code = 1;
    r.duration_s = 3.24;
    r.devices = {2, 3};
    CHECK(annotation(CiKind::github, r) == "::error title=all%25reduce%3Ax::FAIL exit=1 after 3.2s on devices 2-3\n");
    r.error = "line one\nline two";
    CHECK(annotation(CiKind::github, r).find("FAIL exit=1 after 3.2s on devices 2-3: line one%0Aline two\n") !=
          std::string::npos);
    CHECK(annotation(CiKind::gitlab, r).empty());
    r.status = pto::JobStatus::passed;
    CHECK(annotation(CiKind::github, r).empty());
    r.status = pto::JobStatus::flaky;
    CHECK(annotation(CiKind::github, r).empty());
}

}
