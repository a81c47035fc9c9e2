// The direct-exec path (runner/direct_exec.hpp): which lines may skip the
// shell, and, with real processes, that a line run without its shell behaves
// exactly as `/bin/sh -c LINE` does: same environment (PTO_PAR_* included),
// same exit code or signal, same fallbacks and messages when it cannot run.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <pto/scheduler.hpp>

#include "runner/direct_exec.hpp"
#include "runner/environment.hpp"
#include "runner/launcher.hpp"

using pto::runner::plain_command_words;
using W = std::vector<std::string>;

TEST_SUITE("direct_exec") {

TEST_CASE("plain commands qualify, split at blanks")
{
    CHECK(plain_command_words("pytest tests/test_add.py --device 0-3") ==
          W{"pytest", "tests/test_add.py", "--device", "0-3"});
    CHECK(plain_command_words("./run_l3.sh") == W{"./run_l3.sh"});
    CHECK(plain_command_words("  /usr/bin/env\t-u  X  ") == W{"/usr/bin/env", "-u", "X"});
    CHECK(plain_command_words("python3 -m pytest -k a_b --junit-xml=out/r.xml") ==
          W{"python3", "-m", "pytest", "-k", "a_b", "--junit-xml=out/r.xml"});
    CHECK(plain_command_words("run --devices 0,2,5 host:port +x @y 50%") ==
          W{"run", "--devices", "0,2,5", "host:port", "+x", "@y", "50%"});
    CHECK(plain_command_words("sleep 0.01") == W{"sleep", "0.01"});
    // Builtins that behave as their programs when given no argument.
    CHECK(plain_command_words("true") == W{"true"});
    CHECK(plain_command_words("false") == W{"false"});
    // A word with a slash is a path to dash, never a builtin.
    CHECK(plain_command_words("./echo hi") == W{"./echo", "hi"});
    CHECK(plain_command_words("/bin/kill -USR2 0") == W{"/bin/kill", "-USR2", "0"});
}

TEST_CASE("anything the shell would interpret goes to the shell")
{
    const char* lines[] = {
        // quoting and escapes
        "echo 'a b'", "cmd \"a\"", "cmd a\\ b", "cmd \\", "cmd \\n",
        // expansions
        "cmd $HOME", "cmd ${X}", "cmd `date`", "cmd $(date)", "cmd $((1+1))",
        // globs and tilde
        "ls *.py", "ls a?", "ls [ab]", "cd ~", "ls ~/x", "ls a=~/x",
        // redirections and control operators
        "cmd > out", "cmd < in", "cmd 2>&1", "a | b", "a && b", "a || b", "a; b", "a &", "(a)", "a)",
        // comments, braces, newlines and other odd bytes
        "cmd # note", "cmd#x", "{ a; }", "cmd {}", "cmd {devices}", "a\nb", "a\rb", "cmd \x01", "cmd \x7f",
        "cmd caf\xc3\xa9", "cmd !", "cmd a^b",
        // assignments
        "A=1 cmd", "A=1", "PATH=/x cmd", "=cmd",
        // builtins and reserved words
        "echo hi", "echo -e x", "cd /tmp", "exec cmd", ". ./env.sh", ": nothing", "test -f x", "kill -l",
        "pwd", "printf x", "exit 3", "export A", "read x", "umask 0", "ulimit -n", "wait", "set -e",
        "if", "for x in a", "while true", "case", "then", "do", "done", "in", "time cmd", "source x",
        // true and false with arguments (/usr/bin/true --help prints help)
        "true --help", "false x",
        // nothing to run
        "", "   ", "\t",
    };
    for (const char* line : lines) {
        INFO("line: ", line);
        CHECK_FALSE(plain_command_words(line).has_value());
    }
}

TEST_CASE("shell names")
{
    using pto::runner::is_shell_name;
    CHECK(is_shell_name("PATH"));
    CHECK(is_shell_name("_x1"));
    CHECK_FALSE(is_shell_name(""));
    CHECK_FALSE(is_shell_name("1X"));
    CHECK_FALSE(is_shell_name("A-B"));
    CHECK_FALSE(is_shell_name("BASH_FUNC_f%%"));
}

}  // TEST_SUITE

namespace {

using pto::runner::Environment;

struct Outcome {
    bool direct = false;
    std::string output;
    int status = 0;
};

std::string read_all(int fd)
{
    std::string out;
    char buf[4096];
    for (;;) {
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) {
            out.append(buf, static_cast<std::size_t>(n));
            continue;
        }
        if (n == 0)
            return out;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN)
            FAIL("read: ", errno);
        pollfd p{fd, POLLIN, 0};
        (void)poll(&p, 1, -1);
    }
}

// Runs `/bin/sh -c LINE` through the launcher, as the CLI does.
Outcome run_line(const Environment& env, const std::string& line, std::vector<std::string> overrides = {},
                 std::string cwd = {})
{
    static const int dev_null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    REQUIRE(dev_null >= 0);
    sigset_t mask;
    REQUIRE(sigprocmask(SIG_SETMASK, nullptr, &mask) == 0);
    const pto::runner::LaunchContext ctx{&env, dev_null, &mask};
    pto::LaunchSpec spec{{"/bin/sh", "-c", line}, std::move(cwd), std::move(overrides)};
    auto child = pto::runner::launch(spec, ctx);
    REQUIRE(child.has_value());
    Outcome o;
    o.direct = child->direct;
    o.output = read_all(child->output.get());
    while (waitpid(child->pid, &o.status, 0) < 0)
        REQUIRE(errno == EINTR);
    return o;
}

std::string sorted_lines(const std::string& text)
{
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);)
        lines.push_back(l);
    std::sort(lines.begin(), lines.end());
    std::string out;
    for (const auto& l : lines)
        out += l + "\n";
    return out;
}

std::string quoted(const std::string& line)
{
    // The same command with its first word quoted: the shell must run it.
    const auto sp = line.find(' ');
    const auto first = line.substr(0, sp);
    return "'" + first + "'" + (sp == std::string::npos ? "" : line.substr(sp));
}

struct TempDir {
    std::string path;
    TempDir()
    {
        char tmpl[] = "/tmp/pto-direct-exec.XXXXXX";
        REQUIRE(mkdtemp(tmpl) != nullptr);
        path = tmpl;
    }
    ~TempDir()
    {
        std::string cmd = "rm -rf '" + path + "'";
        (void)std::system(cmd.c_str());
    }
};

}  // namespace

TEST_SUITE("direct_exec") {

TEST_CASE("a direct-exec'd job sees the same environment as under sh, PTO_PAR_* included")
{
    if (!pto::runner::sh_is_dash()) {
        MESSAGE("/bin/sh is not dash: every line goes to the shell, nothing to compare");
        return;
    }
    // What dash changes: a name that is not a shell name, a duplicate, IFS,
    // OPTIND and PPID, a stale PWD.
    char* env_entries[] = {
        const_cast<char*>("PATH=/usr/bin:/bin"), const_cast<char*>("A-B=dropped"),
        const_cast<char*>("DUP=first"),          const_cast<char*>("DUP=last"),
        const_cast<char*>("IFS=x"),              const_cast<char*>("OPTIND=7"),
        const_cast<char*>("PPID=1"),             const_cast<char*>("PWD=/nonexistent"),
        const_cast<char*>("BASH_FUNC_f%%=() { :; }"), const_cast<char*>("EMPTY="),
        const_cast<char*>("PTO_PAR_LABEL=inherited"), nullptr,
    };
    const Environment env(env_entries);
    REQUIRE(env.sh_emulated());
    const std::vector<std::string> overrides{"PTO_PAR_DEVICES=0,1", "PTO_PAR_NUM_DEVICES=2",
                                             "PTO_PAR_LABEL=job", "PTO_PAR_SEQ=3", "CUDA_VISIBLE_DEVICES=0,1",
                                             "BAD-NAME=x"};
    const auto direct = run_line(env, "/usr/bin/env", overrides);
    const auto shell = run_line(env, "'/usr/bin/env'", overrides);
    CHECK(direct.direct);
    CHECK_FALSE(shell.direct);
    CHECK(direct.status == 0);
    CHECK(shell.status == 0);
    CHECK(sorted_lines(direct.output) == sorted_lines(shell.output));
    CHECK(direct.output.find("PTO_PAR_DEVICES=0,1\n") != std::string::npos);
    CHECK(direct.output.find("PTO_PAR_LABEL=job\n") != std::string::npos);
    CHECK(direct.output.find("DUP=last\n") != std::string::npos);
    CHECK(direct.output.find("A-B") == std::string::npos);

    // The real environment too, whatever the test runner put in it.
    const Environment real;
    const auto d2 = run_line(real, "env", overrides);
    const auto s2 = run_line(real, "'env'", overrides);
    CHECK(d2.direct);
    CHECK(sorted_lines(d2.output) == sorted_lines(s2.output));
}

TEST_CASE("exit codes and signals are reported as under sh")
{
    const Environment env;
    for (const std::string line : {"/bin/false", "false", "true", "/bin/kill -USR2 0", "/bin/kill -TERM 0",
                                   "sleep 0"}) {
        INFO("line: ", line);
        const auto direct = run_line(env, line);
        const auto shell = run_line(env, quoted(line));
        CHECK(direct.direct == pto::runner::sh_is_dash());
        CHECK_FALSE(shell.direct);
        CHECK(direct.status == shell.status);
        CHECK(direct.output == shell.output);
    }
    const auto killed = run_line(env, "/bin/kill -USR2 0");
    CHECK(WIFSIGNALED(killed.status));
    CHECK(WTERMSIG(killed.status) == SIGUSR2);
}

TEST_CASE("what cannot be run directly ends as under sh, in the shell's words")
{
    const Environment env;
    TempDir dir;
    // A script without #!: execve says ENOEXEC, dash runs it itself.
    const std::string script = dir.path + "/script";
    std::ofstream(script) << "echo from the script $PTO_PAR_SEQ\nexit 3\n";
    REQUIRE(chmod(script.c_str(), 0755) == 0);
    // Not executable: dash says "Permission denied", exit 126.
    const std::string plain = dir.path + "/plain";
    std::ofstream(plain) << "echo never\n";
    REQUIRE(chmod(plain.c_str(), 0644) == 0);

    for (const std::string& line : {script, plain, std::string("no-such-program-pto-par arg"),
                                   dir.path + "/missing"}) {
        INFO("line: ", line);
        const auto direct = run_line(env, line, {"PTO_PAR_SEQ=9"});
        const auto shell = run_line(env, quoted(line), {"PTO_PAR_SEQ=9"});
        // A path is tried directly and its failed execve falls back to the shell.
        CHECK(direct.direct == (pto::runner::sh_is_dash() && line.front() == '/'));
        CHECK(direct.status == shell.status);
        CHECK(direct.output == shell.output);
    }
    const auto ran = run_line(env, script, {"PTO_PAR_SEQ=9"});
    CHECK(ran.output == "from the script 9\n");
    CHECK(WEXITSTATUS(ran.status) == 3);
    // Not found in PATH: not even tried, the shell reports it.
    const auto missing = run_line(env, "no-such-program-pto-par arg");
    CHECK_FALSE(missing.direct);
    CHECK(WEXITSTATUS(missing.status) == 127);
    CHECK(missing.output.find("not found") != std::string::npos);
}

TEST_CASE("lines that keep their shell")
{
    const Environment env;
    CHECK_FALSE(run_line(env, "echo hi").direct);                  // a builtin
    CHECK_FALSE(run_line(env, "env", {}, "/").direct);             // another directory
    CHECK_FALSE(run_line(env, "env", {"PWD=/"}).direct);           // a variable dash sets itself
    CHECK_FALSE(run_line(env, "env", {"PATH=/usr/bin%builtin"}).direct);
    const auto moved = run_line(env, "env", {"PATH=/nonexistent"});  // dash's PATH is the job's
    CHECK_FALSE(moved.direct);
    CHECK(WEXITSTATUS(moved.status) == 127);
}

TEST_CASE("run_jobs reports a direct-exec'd job like a shell-run one")
{
    std::vector<pto::Job> jobs;
    const std::vector<std::string> lines{"env", "'env'", "/bin/kill -USR2 0", "'/bin/kill' -USR2 0", "false",
                                         "'false'"};
    for (const auto& line : lines) {
        pto::Job job;
        job.label = line;
        job.device_count = 1;
        job.build = [line](std::span<const int> ids) -> pto::Expected<pto::LaunchSpec> {
            return pto::LaunchSpec{{"/bin/sh", "-c", line},
                                   {},
                                   {"PTO_PAR_DEVICES=" + std::to_string(ids[0]), "PTO_PAR_LABEL=l"}};
        };
        jobs.push_back(std::move(job));
    }
    pto::RunOptions opt;
    opt.pool = {7};
    opt.max_parallel = 1;
    opt.handle_signals = false;
    opt.keep_output = true;
    auto summary = pto::run_jobs(std::move(jobs), opt);
    REQUIRE(summary.has_value());
    const auto& r = summary->results;
    REQUIRE(r.size() == lines.size());
    CHECK(r[0].status == pto::JobStatus::passed);
    CHECK(r[0].output.find("PTO_PAR_DEVICES=7\n") != std::string::npos);
    CHECK(r[0].output.find("PTO_PAR_LABEL=l\n") != std::string::npos);
    CHECK(sorted_lines(r[0].output) == sorted_lines(r[1].output));
    for (std::size_t i : {2u, 4u}) {
        INFO("line: ", lines[i]);
        CHECK(r[i].status == r[i + 1].status);
        CHECK(r[i].exit_code == r[i + 1].exit_code);
        CHECK(r[i].signal == r[i + 1].signal);
        CHECK(r[i].output == r[i + 1].output);
    }
    CHECK(r[2].status == pto::JobStatus::failed);
    CHECK(r[2].signal == SIGUSR2);
    CHECK(r[4].exit_code == 1);
}

}  // TEST_SUITE
