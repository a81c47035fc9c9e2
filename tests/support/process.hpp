// Runs a real program for the integration tests: pipes for its stdin,
// stdout and stderr, signals on demand, and a hard time limit so that a
// broken pto-par fails a test instead of hanging the suite.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace pto::test {

struct Finished {
    int exit_code = -1;   // -1 when killed by a signal
    int signal = 0;
    std::string out;
    std::string err;
    double seconds = 0;
    bool timed_out = false;  // the harness had to kill it
    long max_rss_kib = 0;     // peak resident set, from wait4
    std::string tty;          // what it wrote to its terminal (Setup::terminal_cols)
};

// How the program's world differs from ours, beyond its environment.
struct Setup {
    std::vector<std::pair<int, unsigned long>> limits{};  // setrlimit(resource, soft=hard=value)
    bool stdout_closed = false;  // its stdout is a pipe whose reader has already gone
    bool controlling_tty = false;  // its own session with a pseudo-terminal as controlling terminal
    // > 0: standard output and error on a pseudo-terminal this wide (and
    // terminal_rows high), its controlling terminal, whose output is read
    // into Finished::tty, as a terminal emulator would.
    unsigned short terminal_cols = 0;
    unsigned short terminal_rows = 24;
    uid_t uid = 0;               // with gid: run as this user (0: as we are)
    gid_t gid = 0;
    std::string cgroup;          // a cgroup v2 directory to run in (empty: ours)

    // A pipe that is kept open but never read (a pager that stopped).
    bool stdout_stalled = false;
    bool stderr_stalled = false;
    std::string stdout_path{};   // its stdout opened on this file instead (/dev/full)

    static Setup limit(int resource, unsigned long value)
    {
        Setup s;
        s.limits = {{resource, value}};
        return s;
    }
    static Setup closed_stdout()
    {
        Setup s;
        s.stdout_closed = true;
        return s;
    }
    static Setup as_user(uid_t uid, gid_t gid)
    {
        Setup s;
        s.uid = uid;
        s.gid = gid;
        return s;
    }
};

class Process {
public:
    // argv[0] is a path. `env` entries NAME=VALUE are added to ours.
    Process(std::vector<std::string> argv, std::string stdin_text = {}, std::vector<std::string> env = {},
            Setup setup = {});
    ~Process();
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;

    pid_t pid() const { return pid_; }
    void send(int sig) const;
    // Until it blocks or catches `sig` (true), as pto-par does from its
    // first line: a signal sent before that, on a loaded machine or under
    // ASan, has its default action and tests nothing of pto-par's.
    bool wait_for_handled(int sig, std::chrono::milliseconds limit) const;

    // Reads until `needle` has appeared on stderr (true) or the time is up.
    bool wait_for_stderr(const std::string& needle, std::chrono::milliseconds limit);
    bool wait_for_stdout(const std::string& needle, std::chrono::milliseconds limit);
    // The same for its terminal (Setup::terminal_cols), from byte `from` on.
    bool wait_for_tty(const std::string& needle, std::chrono::milliseconds limit, std::size_t from = 0);
    const std::string& tty_so_far() const { return tty_; }

    // Resizes its terminal; the kernel sends SIGWINCH to its foreground.
    void resize(unsigned short cols, unsigned short rows) const;

    // Reads everything until exit; kills it after `limit`.
    Finished wait(std::chrono::milliseconds limit = std::chrono::seconds(60));

private:
    void pump(int timeout_ms);
    // Pumps until `text` (out_ or err_) holds `needle`, or the time is up.
    bool wait_for(const std::string& text, const std::string& needle, std::chrono::milliseconds limit);

    pid_t pid_ = -1;
    int tty_master_ = -1;  // held open for the program's controlling terminal
    int tty_fd_ = -1;      // the same, while its output is read (Setup::terminal_cols)
    std::string tty_;
    std::vector<int> stalled_;  // read ends nobody reads
    int out_fd_ = -1;
    int err_fd_ = -1;
    std::string out_;
    std::string err_;
    std::chrono::steady_clock::time_point started_;
    bool reaped_ = false;
};

// Runs to completion.
Finished run(std::vector<std::string> argv, std::string stdin_text = {}, std::vector<std::string> env = {},
             std::chrono::milliseconds limit = std::chrono::seconds(60), Setup setup = {});

// The pto-par binary under test (from the PTO_PAR environment variable that
// meson sets for the test).
std::string pto_par();

// A fresh directory for one test, removed with everything in it at scope end.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }
    // Writes `text` to file(name) and returns its path.
    std::string write(const std::string& name, const std::string& text) const;
    std::string read(const std::string& name) const;

private:
    std::string path_;
};

bool process_alive(pid_t pid);

// A shell command printing `alive` if the process whose pid is in `pidfile`
// still runs, else `gone`. A zombie is gone: under qemu-user, where there is
// no subreaper, an orphan's zombie waits for init to reap it.
std::string alive_or_gone(const std::string& pidfile, const std::string& alive = "ALIVE",
                          const std::string& gone = "GONE");

// Waits up to `limit` for the process to be gone (or a zombie).
bool gone_within(pid_t pid, std::chrono::milliseconds limit);

// True where pto-par can contain jobs in cgroups here (root on a writable
// cgroup v2 hierarchy); tests of that mode say so and skip elsewhere.
bool cgroups_usable();

// True where a pseudo-terminal can be opened: not in a chroot or container
// whose /dev has no devpts mounted on /dev/pts. The terminal tests skip
// elsewhere, saying why.
bool pseudo_terminals_usable();

// True where a process can be a child subreaper; qemu-user refuses it
// (EINVAL), and the tests of what pto-par does with orphans then skip,
// naming qemu.
bool subreaper_usable();

// A cgroup of its own for one test, below the one pto-par would use, so that
// what it does there is out of sight of the pto-par runs of other tests;
// removed at scope end. Only where cgroups_usable().
class TestCgroup {
public:
    TestCgroup();
    ~TestCgroup();
    TestCgroup(const TestCgroup&) = delete;
    TestCgroup& operator=(const TestCgroup&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// Lines of `text` that contain `needle`.
std::vector<std::string> lines_with(const std::string& text, const std::string& needle);

}  // namespace pto::test
