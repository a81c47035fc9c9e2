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

// The token of a GitHub run's ::stop-commands:: (the first), empty if none.
std::string stop_token(const std::string& out)
{
    const std::string mark = "\n::stop-commands::";
    const auto at = out.find(mark);
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
    CHECK(t.size() == 32);
    // -j 1: each block is live, named before its verdict is known.
    CHECK(r.out == "::group::ok\n::stop-commands::" + t + "\nfine\n::" + t + "::\n::endgroup::\n"
                   "::group::bad%25x\n::stop-commands::" + t + "\nbroken\n::" + t + "::\n::endgroup::\n"
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
    REQUIRE(t.size() == 32);
    const std::string printed = "::stop-commands::x\n::x::\n::endgroup::\n::error title=fake::forged\n"
                                "::stop-commands::00000000000000000000000000000000\n";
    CHECK(r.out == "::group::evil\n::stop-commands::" + t + "\n" + printed + "::" + t + "::\n::endgroup::\n"
                   "::group::bad\n::stop-commands::" + t + "\n::" + t + "::\n::endgroup::\n"
                   "::error title=bad::FAIL exit=1 after 0.0s on devices none\n");
    // Another run, another token.
    const auto again = run({pto_par(), "-d", "none", "-j", "1", "--ci", "github", file});
    CHECK(stop_token(again.out).size() == 32);
    CHECK(stop_token(again.out) != t);
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
    // The first job runs alone at first, so its block is live; the two
    // beside it end while it waits for the test, so theirs are whole, with
    // their verdicts.
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
    // Section names no job can guess: pto_par_TOKEN_SEQ, the token random per run.
    const auto at = r.out.find(":pto_par_");
    REQUIRE(at != std::string::npos);
    const std::string t = r.out.substr(at + 9, 32);
    CHECK(t.find_first_not_of("0123456789abcdef") == std::string::npos);
    CHECK(r.out.find(":pto_par_" + t + "_1\r\x1b[0Kgate\n\x1b[0Ksection_end:") != std::string::npos);
    CHECK(r.out.find("pto_par_" + t + "_2[collapsed=true]\r\x1b[0KPASS ok\na\n\x1b[0Ksection_end:") != std::string::npos);
    CHECK(r.out.find(":pto_par_" + t + "_3\r\x1b[0KFAIL bad\nb\n\x1b[0Ksection_end:") != std::string::npos);
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
    REQUIRE(!screen.rows.empty());
    CHECK(screen.rows.back().starts_with("[pto-par] 40 passed, 1 failed"));
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
