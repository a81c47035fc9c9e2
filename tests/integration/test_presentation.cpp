// How a run looks in a CI log and on a colour terminal.
#include <doctest/doctest.h>

#include "process.hpp"

using namespace pto::test;

TEST_SUITE("presentation") {

TEST_CASE("in GitHub Actions each job's block is a group and a failure an annotation; stdout has nothing else")
{
    TempDir dir;
    const auto file = dir.write("g.cmds", "@0,label=ok printf 'fine'\n@0,label=bad%x echo broken; exit 3\n");
    const auto r = run({pto_par(), "-d", "none", "-j", "1", file}, {}, {"GITHUB_ACTIONS=true"});
    CHECK(r.exit_code == 1);
    CHECK(r.out == "::group::PASS ok\nfine\n::endgroup::\n"
                   "::group::FAIL bad%25x\nbroken\n::endgroup::\n"
                   "::error title=bad%25x::FAIL exit=3 after 0.0s on devices none\n");
    const auto plain = run({pto_par(), "-d", "none", "-j", "1", "--ci", "none", file}, {}, {"GITHUB_ACTIONS=true"});
    CHECK(plain.out == "finebroken\n");
}

TEST_CASE("stream mode: no groups (lines interleave), the annotations still come")
{
    TempDir dir;
    const auto r = run({pto_par(), "-d", "none", "--ci", "github", "--output", "stream",
                        dir.write("s.cmds", "@0,label=bad echo x; exit 1\n")});
    CHECK(r.out == "[bad] x\n::error title=bad::FAIL exit=1 after 0.0s on devices none\n");
}

TEST_CASE("GitLab: sections, folded for passed jobs, open for the others")
{
    TempDir dir;
    const auto r = run({pto_par(), "-d", "none", "-j", "1",
                        dir.write("l.cmds", "@0,label=ok echo a\n@0,label=bad echo b; false\n")},
                       {}, {"GITLAB_CI=true"});
    CHECK(r.out.find("pto_par_1[collapsed=true]\r\x1b[0KPASS ok\na\n\x1b[0Ksection_end:") != std::string::npos);
    CHECK(r.out.find(":pto_par_2\r\x1b[0KFAIL bad\nb\n\x1b[0Ksection_end:") != std::string::npos);
}

TEST_CASE("colour: --color always paints the verdicts; never and NO_COLOR with auto do not")
{
    TempDir dir;
    const auto file = dir.write("c.cmds", "@0,label=ok true\n@0,label=bad false\n");
    const auto always = run({pto_par(), "-d", "none", "-j", "1", "--color", "always", file});
    CHECK(always.err.find("[pto-par] \x1b[32mPASS\x1b[0m ok") != std::string::npos);
    CHECK(always.err.find("[pto-par] \x1b[1;31mFAIL\x1b[0m bad") != std::string::npos);
    CHECK(always.err.find("\x1b[1;31m1 passed, 1 failed") != std::string::npos);
    for (const auto& args : {std::vector<std::string>{"--color", "never"}, std::vector<std::string>{"--color", "auto"}}) {
        std::vector<std::string> argv{pto_par(), "-d", "none"};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.push_back(file);
        const auto r = run(argv, {}, {"NO_COLOR=1"});
        CHECK(r.err.find('\x1b') == std::string::npos);
    }
    CHECK(run({pto_par(), "--color", "blue", file}).exit_code == 2);
    CHECK(run({pto_par(), "--ci", "jenkins", file}).exit_code == 2);
}

}
