// How a run looks in a CI log and on a colour terminal.
#include <doctest/doctest.h>

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "process.hpp"
#include "screen.hpp"

using namespace pto::test;
using namespace std::chrono_literals;

TEST_SUITE("presentation") {

namespace {

// The token of a GitHub run's nth ::stop-commands:: (from 0), empty if none.
std::string stop_token(const std::string& out, int nth = 0)
{
    const std::string mark = "\n::stop-commands::";
    auto at = out.find(mark);
    for (; nth > 0 && at != std::string::npos; --nth)
        at = out.find(mark, at + 1);
    if (at == std::string::npos)
        return {};
    const auto from = at + mark.size();
    return out.substr(from, out.find('\n', from) - from);
}

}  // namespace

TEST_CASE("in GitHub Actions each job's block is a group and a failure an annotation; stdout has nothing else")
{
    TempDir dir;
    const auto file = dir.write("g.cmds", "@0,label=ok printf 'fine'\n@0,label=bad%x echo broken; exit 3\n");
    const auto r = run({pto_par(), "-d", "none", "-j", "1", file}, {}, {"GITHUB_ACTIONS=true"});
    CHECK(r.exit_code == 1);
    const std::string t = stop_token(r.out);
    const std::string t2 = stop_token(r.out, 1);
    CHECK(t.size() == 32);
    // -j 1: each block is live, named before its verdict is known.
    CHECK(r.out == "::group::ok\n::stop-commands::" + t + "\nfine\n::" + t + "::\n::endgroup::\n"
                   "::group::bad%25x\n::stop-commands::" + t2 + "\nbroken\n::" + t2 + "::\n::endgroup::\n"
                   "::error title=bad%25x::FAIL exit=3 after 0.0s on devices none\n");
    const auto plain = run({pto_par(), "-d", "none", "-j", "1", "--ci", "none", file}, {}, {"GITHUB_ACTIONS=true"});
    CHECK(plain.out == "finebroken\n");
}

TEST_CASE("a job cannot switch off, close or forge pto-par's GitHub markers: its bytes are inside stop-commands")
{
    TempDir dir;
    // What a hostile or careless job prints, each alone on a line as the
    // runner would read it, a guess at a token among them.
    const std::string evil = "::stop-commands::x\\n::x::\\n::endgroup::\\n::error title=fake::forged\\n"
                             "::stop-commands::00000000000000000000000000000000\\n";
    const auto file = dir.write("e.cmds", "@0,label=evil printf '" + evil + "'\n@0,label=bad false\n");
    const auto r = run({pto_par(), "-d", "none", "-j", "1", "--ci", "github", file});
    const std::string t = stop_token(r.out);
    const auto bad = r.out.find("::group::bad\n::stop-commands::");
    REQUIRE(bad != std::string::npos);
    const std::string t2 = r.out.substr(bad + 30, 32);
    REQUIRE(t.size() == 32);
    const std::string printed = "::stop-commands::x\n::x::\n::endgroup::\n::error title=fake::forged\n"
                                "::stop-commands::00000000000000000000000000000000\n";
    CHECK(r.out == "::group::evil\n::stop-commands::" + t + "\n" + printed + "::" + t + "::\n::endgroup::\n"
                   "::group::bad\n::stop-commands::" + t2 + "\n::" + t2 + "::\n::endgroup::\n"
                   "::error title=bad::FAIL exit=1 after 0.0s on devices none\n");
    // Another run, another token.
    const auto again = run({pto_par(), "-d", "none", "-j", "1", "--ci", "github", file});
    CHECK(stop_token(again.out).size() == 32);
    CHECK(stop_token(again.out) != t);
}

namespace {

// Whether some line beginning "[pto-par] " lies between a group's start and
// its end (GitHub's ::group:: ... ::endgroup::, GitLab's section_start ...
// section_end), where the CI page would fold it away under another job.
bool status_inside_group(const std::string& log, const std::string& begin, const std::string& end)
{
    bool inside = false;
    std::size_t at = 0;
    while (at < log.size()) {
        const auto nl = log.find('\n', at);
        const std::string line = log.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
        at = nl == std::string::npos ? log.size() : nl + 1;
        if (line.find(begin) != std::string::npos)
            inside = true;
        else if (line.find(end) != std::string::npos)
            inside = false;
        else if (inside && line.rfind("[pto-par] ", 0) == 0)
            return true;
    }
    return false;
}

}  // namespace

TEST_CASE("2>&1 in a CI log: no status line lands inside a live job's group; its rest follows as a block of its own")
{
    TempDir dir;
    const auto file = dir.write("lv.cmds", "@0,label=a echo x; sleep 0.5; echo y\n@0,label=b exit 1\n");
    const auto r = run({"/bin/sh", "-c", "exec \"$0\" -d none -j 2 \"$1\" 2>&1", pto_par(), file}, {},
                       {"GITHUB_ACTIONS=true"});
    CHECK(r.exit_code == 1);
    CAPTURE(r.out);
    CHECK_FALSE(status_inside_group(r.out, "::group::", "::endgroup::"));
    CHECK(r.out.find("x\n") != std::string::npos);
    CHECK(r.out.find("y\n") != std::string::npos);
    CHECK(r.out.find("[pto-par] FAIL b") != std::string::npos);
    // A live job that another one starts beside, after its first line.
    const auto flag = dir.file("flag");
    const auto later = dir.write("l2.cmds", "@0,label=first sleep 0.2\n"
                                            "@0,label=long echo L1; i=0; while [ ! -e " + flag +
                                            " ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; echo L2\n"
                                            "@0,label=short echo S; touch " + flag + "; exit 1\n");
    const auto l = run({"/bin/sh", "-c", "exec \"$0\" -d none -j 2 \"$1\" 2>&1", pto_par(), later}, {},
                       {"GITHUB_ACTIONS=true"});
    CAPTURE(l.out);
    CHECK_FALSE(status_inside_group(l.out, "::group::", "::endgroup::"));
    CHECK(l.out.find("::group::long\n") != std::string::npos);
    CHECK(l.out.find("\nL1\n") != std::string::npos);
    CHECK(l.out.find("::group::PASS long (continued)\n") != std::string::npos);
    CHECK(l.out.find("\nL2\n") != std::string::npos);
    // Each verdict right after its block.
    CHECK(l.out.find("::endgroup::\n::error title=short::FAIL exit=1 after 0.0s on devices none\n[pto-par] FAIL short") !=
          std::string::npos);
    CHECK(l.out.find("::endgroup::\n[pto-par] PASS long") != std::string::npos);
}

TEST_CASE("one log without CI: a job's verdict line comes right after its block, live or not")
{
    TempDir dir;
    const auto flag = dir.file("flag");
    const auto file = dir.write("v.cmds", "@0,label=first sleep 0.2\n"
                                          "@0,label=long echo L1; i=0; while [ ! -e " + flag +
                                          " ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; echo L2\n"
                                          "@0,label=short echo S; touch " + flag + "\n");
    const auto r = run({"/bin/sh", "-c", "exec \"$0\" -d none -j 2 \"$1\" 2>&1", pto_par(), file});
    CHECK(r.exit_code == 0);
    CAPTURE(r.out);
    CHECK(r.out.find("\nS\n[pto-par] PASS short") != std::string::npos);
    CHECK(r.out.find("\nL2\n[pto-par] PASS long") != std::string::npos);
}

TEST_CASE("GitLab on one device: every passed job folds, live or not")
{
    TempDir dir;
    const auto r = run({pto_par(), "-d", "none", "-j", "1", "--ci", "gitlab",
                        dir.write("g.cmds", "@0,label=p1 echo one\n@0,label=p2 echo two\n@0,label=bad false\n")});
    CHECK(r.exit_code == 1);
    CAPTURE(r.out);
    CHECK(r.out.find("[collapsed=true]\r\x1b[0KPASS p1\none\n") != std::string::npos);
    CHECK(r.out.find("[collapsed=true]\r\x1b[0KPASS p2\ntwo\n") != std::string::npos);
    CHECK(r.out.find("\r\x1b[0KFAIL bad\n") != std::string::npos);
}

TEST_CASE("GitHub: each block has a stop-commands token of its own")
{
    TempDir dir;
    const auto r = run({pto_par(), "-d", "none", "-j", "1", "--ci", "github",
                        dir.write("t.cmds", "@0,label=a echo a\n@0,label=b echo b\n")});
    CHECK(r.exit_code == 0);
    const std::string mark = "::stop-commands::";
    const auto first = r.out.find(mark);
    const auto second = r.out.find(mark, first + 1);
    REQUIRE(second != std::string::npos);
    const auto t1 = r.out.substr(first + mark.size(), 32);
    const auto t2 = r.out.substr(second + mark.size(), 32);
    CHECK(t1 != t2);
    CHECK(r.out.find("::" + t1 + "::\n::endgroup::\n::group::b") != std::string::npos);
    CHECK(r.out.find("::" + t2 + "::\n::endgroup::\n") != std::string::npos);
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
    // The first job runs alone at first, but no block is live on GitLab
    // (a section folds only if its start says so): each waits for its
    // verdict, the two beside the first one's first.
    const auto flag = dir.file("flag");
    Process p({pto_par(), "-d", "none", "-j", "3",
               dir.write("l.cmds", "@0,label=gate i=0; while [ ! -e " + flag +
                                       " ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done\n"
                                       "@0,label=ok echo a\n@0,label=bad echo b; false\n")},
              {}, {"GITLAB_CI=true"});
    const bool ended = p.wait_for_stderr("PASS ok", 20s) && p.wait_for_stderr("FAIL bad", 20s);
    std::ofstream(flag) << "";
    const auto r = p.wait(30s);
    CHECK(ended);
    // Section names no job can guess: pto_par_TOKEN_SEQ, the token random per block.
    CAPTURE(r.out);
    const auto token = [&r](int seq) {
        const auto at = r.out.find(":pto_par_");
        for (auto a = at; a != std::string::npos; a = r.out.find(":pto_par_", a + 1))
            if (r.out.compare(a + 9 + 32, 2, "_" + std::to_string(seq)) == 0)
                return r.out.substr(a + 9, 32);
        return std::string();
    };
    const std::string t1 = token(1), t2 = token(2), t3 = token(3);
    CHECK(t1.size() == 32);
    CHECK(t1.find_first_not_of("0123456789abcdef") == std::string::npos);
    CHECK(t1 != t2);
    CHECK(r.out.find("pto_par_" + t2 + "_2[collapsed=true]\r\x1b[0KPASS ok\na\n\x1b[0Ksection_end:") != std::string::npos);
    CHECK(r.out.find(":pto_par_" + t3 + "_3\r\x1b[0KFAIL bad\nb\n\x1b[0Ksection_end:") != std::string::npos);
    CHECK(r.out.find(":pto_par_" + t1 + "_1[collapsed=true]\r\x1b[0KPASS gate\n\x1b[0Ksection_end:") !=
          std::string::npos);
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

namespace {

std::string many_jobs(int n, const std::string& extra = {})
{
    std::string text;
    for (int i = 1; i <= n; ++i)
        text += "@0,label=test_operator_" + std::to_string(i) + "_with_a_long_name sleep 0.0" + std::to_string(i % 5) +
                "; echo out-" + std::to_string(i) + "\n";
    return text + extra;
}

bool all_digits(std::string_view s)
{
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// "[12/80] ... running", anywhere in the row.
bool looks_like_progress(std::string_view row)
{
    for (std::size_t at = row.find('['); at != std::string_view::npos; at = row.find('[', at + 1)) {
        const auto slash = row.find('/', at);
        const auto close = row.find("] ", at);
        if (slash != std::string_view::npos && close != std::string_view::npos && slash < close &&
            all_digits(row.substr(at + 1, slash - at - 1)) && all_digits(row.substr(slash + 1, close - slash - 1)) &&
            row.find("running", close) != std::string_view::npos)
            return true;
    }
    return false;
}

// PREFIX followed by a number, and nothing else.
bool numbered(std::string_view row, std::string_view prefix)
{
    return row.starts_with(prefix) && all_digits(row.substr(prefix.size()));
}

}  // namespace

TEST_CASE("progress line on a terminal: drawn in place within the width, gone from the final screen")
{
    if (!pseudo_terminals_usable()) {
        MESSAGE("skipped: no pseudo-terminal can be opened here");
        return;
    }
    TempDir dir;
    const auto file = dir.write("p.cmds", many_jobs(40, "@0,label=bad sleep 0.2; echo bad-out; exit 3\n"));
    Setup tty;
    tty.terminal_cols = 100;
    const auto r = run({pto_par(), "-d", "none", "-j", "4", file}, {}, {"TERM=xterm"}, std::chrono::seconds(60), tty);
    CHECK(r.exit_code == 1);
    const auto draws = progress_draws(r.tty);
    REQUIRE(draws.size() >= 2);
    bool cut = false;
    for (const auto& d : draws) {
        CHECK_MESSAGE(looks_like_progress(d), d);
        CHECK_MESSAGE(columns(d) <= 99, d);  // one short of the width: no autowrap
        cut = cut || d.find("\xE2\x80\xA6") != std::string::npos;
    }
    CHECK(cut);  // four long labels do not fit in 100 columns
    const Screen screen = render(r.tty, 100);
    CHECK(screen.unknown.empty());
    CHECK(screen.wraps == 0);
    int passed = 0, failed = 0;
    for (const auto& row : screen.rows) {
        CHECK_MESSAGE(!looks_like_progress(row), row);
        // Every row is whole: a status line or a job's output line.
        const bool ours = row.starts_with("[pto-par] ");
        const bool job = numbered(row, "out-") || row == "bad-out";
        CHECK_MESSAGE((ours || job), row);
        passed += row.starts_with("[pto-par] PASS ") ? 1 : 0;
        failed += row.starts_with("[pto-par] FAIL bad ") ? 1 : 0;
    }
    CHECK(passed == 40);
    CHECK(failed == 1);
    for (int i = 1; i <= 40; ++i)
        CHECK(std::count(screen.rows.begin(), screen.rows.end(), "out-" + std::to_string(i)) == 1);
    // The summary, then the job that failed.
    REQUIRE(screen.rows.size() >= 2);
    CHECK(screen.rows[screen.rows.size() - 2].starts_with("[pto-par] 40 passed, 1 failed"));
    CHECK(screen.rows.back().starts_with("[pto-par]   FAIL bad (line "));
}

TEST_CASE("progress line: stream output on the same terminal comes above it, every line whole")
{
    if (!pseudo_terminals_usable()) {
        MESSAGE("skipped: no pseudo-terminal can be opened here");
        return;
    }
    TempDir dir;
    std::string text;
    for (int i = 1; i <= 6; ++i)
        text += "@0,label=j" + std::to_string(i) + " for k in $(seq 1 200); do echo line-$k; done\n";
    Setup tty;
    tty.terminal_cols = 80;
    const auto r = run({pto_par(), "-d", "none", "-j", "3", "-q", "--output", "stream", dir.write("s.cmds", text)}, {},
                       {"TERM=xterm"}, std::chrono::seconds(60), tty);
    CHECK(r.exit_code == 0);
    const Screen screen = render(r.tty, 80);
    int lines = 0;
    for (const auto& row : screen.rows) {
        CHECK_MESSAGE(!looks_like_progress(row), row);
        if (row.starts_with("[pto-par] "))
            continue;
        const auto close = row.find("] line-");
        CHECK_MESSAGE((numbered(row.substr(0, close), "[j") && numbered(row.substr(close + 2), "line-")), row);
        ++lines;
    }
    CHECK(lines == 6 * 200);
}

TEST_CASE("progress line: not drawn over a live job's line in the making on the same terminal")
{
    if (!pseudo_terminals_usable()) {
        MESSAGE("skipped: no pseudo-terminal can be opened here");
        return;
    }
    TempDir dir;
    Setup tty;
    tty.terminal_cols = 80;
    // The clock redraws the line each second, while the job's line waits
    // for its end.
    const auto r = run({pto_par(), "-d", "none", "-j", "1", "-q", "--progress", "always",
                        dir.write("p.cmds", "@0,label=a printf part; sleep 1.5; echo end\n")},
                       {}, {"TERM=xterm"}, std::chrono::seconds(60), tty);
    CHECK(r.exit_code == 0);
    const Screen screen = render(r.tty, 80);
    CHECK(std::find(screen.rows.begin(), screen.rows.end(), "partend") != screen.rows.end());
}

TEST_CASE("progress line: a resized terminal gets a line that fits its new width")
{
    if (!pseudo_terminals_usable()) {
        MESSAGE("skipped: no pseudo-terminal can be opened here");
        return;
    }
    TempDir dir;
    Setup tty;
    tty.terminal_cols = 120;
    Process p({pto_par(), "-d", "none", "-j", "2", "-q",
               dir.write("w.cmds", "@0,label=a_job_with_a_rather_long_label sleep 30\n"
                                   "@0,label=another_long_label sleep 30\n")},
              {}, {"TERM=xterm"}, tty);
    REQUIRE(p.wait_for_tty("another_long_label", std::chrono::seconds(10)));
    const std::size_t before = p.tty_so_far().size();
    p.resize(30, 24);
    // The next drawing after the resize ends with the clock; it must fit.
    REQUIRE(p.wait_for_tty("\x1b[K", std::chrono::seconds(10), before));
    REQUIRE(p.wait_for_tty("\x1b[K", std::chrono::seconds(10), p.tty_so_far().size()));
    const auto draws = progress_draws(std::string_view(p.tty_so_far()).substr(before));
    REQUIRE(!draws.empty());
    CHECK_MESSAGE(columns(draws.back()) <= 29, draws.back());
    p.send(SIGINT);
    const auto r = p.wait(std::chrono::seconds(20));
    CHECK(r.exit_code == 130);
    // From the resize on: what was drawn 120 wide before, a terminal
    // reflows or cuts as it likes.
    const Screen screen = render(std::string_view(r.tty).substr(before), 30);
    for (const auto& row : screen.rows)
        CHECK_MESSAGE(!looks_like_progress(row), row);
}

TEST_CASE("progress line: never in a pipe, on TERM=dumb, in a CI log or with --progress never; always forces it")
{
    if (!pseudo_terminals_usable()) {
        MESSAGE("skipped: no pseudo-terminal can be opened here");
        return;
    }
    TempDir dir;
    const auto file = dir.write("n.cmds", "@0,label=a sleep 0.3\n@0,label=b sleep 0.3\n");
    CHECK(run({pto_par(), "-d", "none", file}).err.find('\r') == std::string::npos);  // stderr is a pipe
    Setup tty;
    tty.terminal_cols = 80;
    for (const auto& [args, env] :
         {std::pair{std::vector<std::string>{}, std::vector<std::string>{"TERM=dumb"}},
          std::pair{std::vector<std::string>{"--ci", "github"}, std::vector<std::string>{"TERM=xterm"}},
          std::pair{std::vector<std::string>{"--progress", "never"}, std::vector<std::string>{"TERM=xterm"}}}) {
        std::vector<std::string> argv{pto_par(), "-d", "none"};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.push_back(file);
        const auto r = run(argv, {}, env, std::chrono::seconds(30), tty);
        CHECK(r.exit_code == 0);
        CHECK_MESSAGE(progress_draws(r.tty).empty(), r.tty);
    }
    const auto forced = run({pto_par(), "-d", "none", "--progress", "always", file});
    CHECK(forced.exit_code == 0);
    const auto draws = progress_draws(forced.err);
    REQUIRE(!draws.empty());
    CHECK(draws.front().starts_with("[0/2] "));
    // Taken away before the summary, the last line.
    std::string as_on_terminal;
    for (char c : forced.err)
        as_on_terminal += c == '\n' ? std::string("\r\n") : std::string(1, c);
    const Screen screen = render(as_on_terminal, 200);
    for (const auto& row : screen.rows)
        CHECK_MESSAGE(!looks_like_progress(row), row);
    REQUIRE(!screen.rows.empty());
    CHECK(screen.rows.back().starts_with("[pto-par] 2 passed"));
    CHECK(run({pto_par(), "--progress", "sometimes", file}).exit_code == 2);
}

}
