#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "report/junit_report.hpp"

#include "scratch_dir.hpp"

namespace fs = std::filesystem;
using pto::JobOutput;
using pto::JobResult;
using pto::JobStatus;
using pto::report::JunitReport;
using pto::report::xml_escape;
using pto::report::XmlEscaper;

namespace {

// The tests name their scratch directory after the report they write.
struct TempDir : pto::test::ScratchDir {
    TempDir() : ScratchDir("pto-par-junit") {}
};

std::string slurp(const fs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// Parses the report with a real XML parser (Python's, always there with
// Meson) and writes what it read into files under `into`:
//   suite: "tests failures errors skipped name" of the one <testsuite>
//   N.name, N.kind ("failure|message", "passed"...), N.out, N.err, N.props
// for the N-th testcase, text exactly as the parser decoded it.
// Returns the python exit status: non-zero if the file is not well-formed.
int parse_back(const fs::path& report, const fs::path& into)
{
    const fs::path script = into / "parse.py";
    std::ofstream(script) << R"PY(
import sys, os, xml.dom.minidom as minidom
doc = minidom.parse(sys.argv[1])
suite = doc.documentElement
assert suite.tagName == 'testsuite', suite.tagName
out = sys.argv[2]
def put(name, text):
    with open(os.path.join(out, name), 'w', encoding='utf-8', newline='') as f:
        f.write(text)
put('suite', ' '.join(suite.getAttribute(a) for a in ('tests', 'failures', 'errors', 'skipped', 'name')))
def text(node):
    return ''.join(c.data for c in node.childNodes if c.nodeType in (c.TEXT_NODE, c.CDATA_SECTION_NODE))
cases = [c for c in suite.childNodes if c.nodeType == c.ELEMENT_NODE]
for i, tc in enumerate(cases):
    assert tc.tagName == 'testcase'
    put('%d.name' % i, tc.getAttribute('name'))
    put('%d.classname' % i, tc.getAttribute('classname'))
    kind, o, e, props = 'passed', '', '', []
    for c in tc.childNodes:
        if c.nodeType != c.ELEMENT_NODE:
            continue
        if c.tagName in ('failure', 'error', 'skipped'):
            kind = c.tagName + '|' + c.getAttribute('message')
        elif c.tagName == 'system-out':
            o = text(c)
        elif c.tagName == 'system-err':
            e = text(c)
        elif c.tagName == 'properties':
            props = [p.getAttribute('name') + '=' + p.getAttribute('value') for p in c.getElementsByTagName('property')]
    put('%d.kind' % i, kind)
    put('%d.out' % i, o)
    put('%d.err' % i, e)
    put('%d.props' % i, '\n'.join(props))
put('count', str(len(cases)))
)PY";
    const std::string cmd = "python3 '" + script.string() + "' '" + report.string() + "' '" + into.string() + "'";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

pto::Job spec(std::size_t seq, std::string label, std::string command = "true")
{
    pto::Job s;
    s.seq = seq;
    s.line = seq * 2;
    s.label = std::move(label);
    s.command = std::move(command);
    return s;
}

JobResult result(const pto::Job& s, JobStatus status, std::optional<int> exit_code, int signal = 0)
{
    JobResult r;
    r.index = s.seq - 1;
    r.label = s.label;
    r.status = status;
    r.exit_code = exit_code;
    r.signal = signal;
    if (status != JobStatus::cancelled) {
        r.pid = 4000 + static_cast<int>(s.seq);
        r.devices = {0, 1};
        r.start = 1700000000;
        r.end = 1700000010;
        r.duration_s = 10;
    }
    return r;
}

std::string all_bytes()
{
    std::string s;
    for (int c = 0; c < 256; ++c)
        s += static_cast<char>(c);
    return s;
}

// What a parser must read back for `bytes` without valid multi-byte UTF-8
// put through the escaper: the same text, with what XML cannot carry as \xNN.
std::string expected_text(std::string_view bytes)
{
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(bytes[i]);
        if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f || c >= 0x80) {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

}  // namespace

TEST_SUITE("junit") {

TEST_CASE("escaping: markup, attributes, control characters")
{
    CHECK(xml_escape("a<b&c>d") == "a&lt;b&amp;c&gt;d");
    CHECK(xml_escape("]]>") == "]]&gt;");
    CHECK(xml_escape("<![CDATA[x]]>") == "&lt;![CDATA[x]]&gt;");
    CHECK(xml_escape("\"q\" 'a'\t\n") == "\"q\" 'a'\t\n");
    CHECK(xml_escape("\"q\" 'a'\t\n", true) == "&quot;q&quot; &apos;a&apos;&#9;&#10;");
    CHECK(xml_escape("a\r\nb") == "a&#13;\nb");
    CHECK(xml_escape(std::string("\0\x01\x1b[0m\x7f", 7)) == "\\x00\\x01\\x1b[0m\\x7f");
}

TEST_CASE("escaping: valid UTF-8 kept, invalid bytes and XML non-characters made visible")
{
    CHECK(xml_escape("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    CHECK(xml_escape("\xef\xbf\xbd") == "\xef\xbf\xbd");          // U+FFFD is a Char
    CHECK(xml_escape("\xc2\x85") == "\xc2\x85");                  // so is NEL
    CHECK(xml_escape("\xff\xfe") == "\\xff\\xfe");
    CHECK(xml_escape("\xc3") == "\\xc3");                          // cut short at the end
    CHECK(xml_escape("\xc3x") == "\\xc3x");                        // cut short by ASCII
    CHECK(xml_escape("\xc0\xaf") == "\\xc0\\xaf");                 // overlong '/'
    CHECK(xml_escape("\xe0\x80\xaf") == "\\xe0\\x80\\xaf");        // overlong
    CHECK(xml_escape("\xed\xa0\x80") == "\\xed\\xa0\\x80");        // a surrogate
    CHECK(xml_escape("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
    CHECK(xml_escape("\xef\xbf\xbe\xef\xbf\xbf") == "\\xef\\xbf\\xbe\\xef\\xbf\\xbf");  // U+FFFE, U+FFFF
    CHECK(xml_escape("\xe2\x82") == "\\xe2\\x82");
    CHECK(xml_escape("\xe2\x82\xe2\x82\xac") == "\\xe2\\x82\xe2\x82\xac");
}

TEST_CASE("escaping in pieces gives the same as escaping at once")
{
    std::string hostile = all_bytes() + "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbe \xed\xa0\x80 \xe2\x82" +
                          "\xf0\x9f\x98 ]]> <![CDATA[" + all_bytes() + "\xf0\x9f\x98\x80\xc3";
    const std::string whole = xml_escape(hostile);
    for (const std::size_t step : {1, 2, 3, 5, 7, 64}) {
        CAPTURE(step);
        XmlEscaper esc;
        std::string out;
        for (std::size_t i = 0; i < hostile.size(); i += step)
            esc.feed(std::string_view(hostile).substr(i, step), out);
        esc.finish(out);
        CHECK(out == whole);
    }
}

TEST_CASE("a report with hostile output parses back, with counts, messages and text intact")
{
    const TempDir tmp;
    std::vector<pto::Job> specs = {
        spec(1, "pass"),
        spec(2, "fail \"<&'>", "exit 3 # <&\"'>"),
        spec(3, "segv"),
        spec(4, "slow"),
        spec(5, "stopped"),
        spec(6, "not started"),
        spec(7, "never reported"),
        spec(8, "utf8 \xc3\xa9\xff"),
    };
    const std::string hostile = all_bytes() + "\n]]>\n<![CDATA[ x ]]>\n\xff\xfe\xc3(\xed\xa0\x80 ok \xc3\xa9\n" + all_bytes();
    const fs::path file = tmp.path() / "report.xml";
    JunitReport junit(file.string(), specs, "suite <&\">");
    REQUIRE(junit.open());

    // In an order unlike the file's: the report is in the file's order anyway.
    const auto finish = [&](const JobResult& r, std::string_view bytes) {
        JobOutput out;
        out.append(bytes);
        junit.on_finish(specs[r.index], r, out);
    };
    finish(result(specs[4], JobStatus::killed, std::nullopt, SIGTERM), "bye");
    finish(result(specs[1], JobStatus::failed, 3), hostile);
    junit.on_cancel(specs[5], result(specs[5], JobStatus::cancelled, std::nullopt));
    finish(result(specs[0], JobStatus::passed, 0), "all good\n");
    finish(result(specs[2], JobStatus::failed, std::nullopt, SIGSEGV), "");
    auto timed_out = result(specs[3], JobStatus::timeout, std::nullopt, SIGKILL);
    timed_out.time_limit_s = 3;
    finish(timed_out, "tick\ntock");
    auto utf = result(specs[7], JobStatus::failed, std::nullopt);
    utf.pid = -1;
    utf.error = "posix_spawn /bin/nope: No such file or directory";
    finish(utf, "");

    CHECK(!fs::exists(file));  // nothing there until close
    REQUIRE(junit.close(12.5));
    CHECK(!junit.error());
    REQUIRE(parse_back(file, tmp.path()) == 0);

    CHECK(slurp(tmp.path() / "suite") == "8 3 2 2 suite <&\">");
    CHECK(slurp(tmp.path() / "count") == "8");
    for (std::size_t i = 0; i < specs.size(); ++i) {
        CAPTURE(i);
        const auto name = slurp(tmp.path() / (std::to_string(i) + ".name"));
        if (i == 7)
            CHECK(name == "utf8 \xc3\xa9\\xff");
        else
            CHECK(name == specs[i].label);
        CHECK(slurp(tmp.path() / (std::to_string(i) + ".classname")) == "suite <&\">");
    }
    const auto kind = [&](int i) { return slurp(tmp.path() / (std::to_string(i) + ".kind")); };
    const auto out = [&](int i) { return slurp(tmp.path() / (std::to_string(i) + ".out")); };
    const auto err = [&](int i) { return slurp(tmp.path() / (std::to_string(i) + ".err")); };
    CHECK(kind(0) == "passed");
    CHECK(out(0) == "all good\n");
    CHECK(kind(1) == "failure|exit code 3");
    // all_bytes() holds no valid multi-byte sequence: each of its high bytes is escaped.
    CHECK(out(1) == expected_text(all_bytes()) + "\n]]>\n<![CDATA[ x ]]>\n\\xff\\xfe\\xc3(\\xed\\xa0\\x80 ok \xc3\xa9\n" +
                        expected_text(all_bytes()));
    CHECK(kind(2) == "failure|killed by SIGSEGV");
    CHECK(out(2).empty());
    CHECK(kind(3) == "error|timed out: past its 3.0s limit, ended by SIGKILL after 10.0s");
    CHECK(out(3) == "tick\ntock");
    CHECK(kind(4) == "error|stopped by pto-par (SIGTERM)");
    CHECK(kind(5) == "skipped|not started");
    CHECK(kind(6) == "skipped|not started");
    CHECK(kind(7) == "failure|could not start: posix_spawn /bin/nope: No such file or directory");
    CHECK(err(7) == "posix_spawn /bin/nope: No such file or directory");

    const auto props = slurp(tmp.path() / "1.props");
    CHECK(props.find("seq=2") != std::string::npos);
    CHECK(props.find("line=4") != std::string::npos);
    CHECK(props.find("devices=0-1") != std::string::npos);
    CHECK(props.find("command=exit 3 # <&\"'>") != std::string::npos);
    CHECK(props.find("pid=4002") != std::string::npos);

    // No temporary left beside the report.
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(tmp.path()))
        if (e.path().filename().string().find(".tmp") != std::string::npos)
            names.push_back(e.path().filename().string());
    CHECK(names.empty());
}

TEST_CASE("a big spilled output streams through, UTF-8 split across chunks and all")
{
    const TempDir tmp;
    const std::vector<pto::Job> specs = {spec(1, "big")};
    const fs::path file = tmp.path() / "big.xml";
    JunitReport junit(file.string(), specs, "s");
    REQUIRE(junit.open());
    auto out = *JobOutput::reserve(pto::SpillPlace{}, 4096);  // spills to its own file past 4 KiB
    std::string all = "x";  // one byte off, so multi-byte characters straddle 64 KiB chunks
    for (int i = 0; i < 60000; ++i)
        all += (i % 1000 == 999) ? "\n" : (i % 7 == 0 ? "\xe2\x82\xac" : "\xc3\xa9");
    for (std::size_t i = 0; i < all.size(); i += 1000)
        out.append(std::string_view(all).substr(i, 1000));
    REQUIRE(out.size() == all.size());
    junit.on_finish(specs[0], result(specs[0], JobStatus::passed, 0), out);
    REQUIRE(junit.close(1));
    REQUIRE(parse_back(file, tmp.path()) == 0);
    CHECK(slurp(tmp.path() / "0.out") == all);
    CHECK(slurp(tmp.path() / "suite") == "1 0 0 0 s");
}

TEST_CASE("past the output limit a testcase keeps the head and the tail, and says how much is left out")
{
    const TempDir tmp;
    const std::vector<pto::Job> specs = {spec(1, "long"), spec(2, "short")};
    const fs::path file = tmp.path() / "limit.xml";
    JunitReport junit(file.string(), specs, "s", 1000);
    REQUIRE(junit.open());
    auto out = *JobOutput::reserve(pto::SpillPlace{}, 4096);
    // A character of two bytes across each cut: the head ends after it, the
    // tail starts after its rest, never half a character either side.
    const std::string head = std::string(499, 'H') + "\xc3\xa9";
    const std::string tail = "\xc3\xa9" + std::string(499, 'T');
    out.append(head + std::string(3998, '\0') + tail);
    auto small = *JobOutput::reserve(pto::SpillPlace{}, 4096);
    small.append(std::string(1000, 's'));
    junit.on_finish(specs[0], result(specs[0], JobStatus::failed, 1), out);
    junit.on_finish(specs[1], result(specs[1], JobStatus::passed, 0), small);
    REQUIRE(junit.close(1));
    REQUIRE(parse_back(file, tmp.path()) == 0);
    CHECK(slurp(tmp.path() / "0.out") ==
          std::string(499, 'H') + "\xc3\xa9\n[pto-par: 4000 bytes of output left out]\n" + std::string(499, 'T'));
    CHECK(slurp(tmp.path() / "1.out") == std::string(1000, 's'));
    CHECK(fs::file_size(file) < 3000);
}

TEST_CASE("past the output limit a four-byte character at any offset across either cut is kept whole or left out whole")
{
    const std::string grin = "\xf0\x9f\x98\x80";
    for (std::size_t shift = 0; shift < 4; ++shift) {
        CAPTURE(shift);
        const TempDir tmp;
        const std::vector<pto::Job> specs = {spec(1, "long")};
        const fs::path file = tmp.path() / "limit.xml";
        JunitReport junit(file.string(), specs, "s", 100);
        REQUIRE(junit.open());
        auto out = *JobOutput::reserve(pto::SpillPlace{}, 4096);
        // The cut is at byte 50 and the tail resumes at byte 150 of 200.
        std::string all = std::string(47 + shift, 'H') + grin;
        all += std::string(150 - 3 + shift - all.size(), 'M') + grin;
        all += std::string(200 - all.size(), 'T');
        out.append(all);
        junit.on_finish(specs[0], result(specs[0], JobStatus::failed, 1), out);
        REQUIRE(junit.close(1));
        REQUIRE(parse_back(file, tmp.path()) == 0);
        const std::string kept = slurp(tmp.path() / "0.out");
        CHECK(kept.find("\\x") == std::string::npos);
        const auto note = kept.find("\n[pto-par: ");
        REQUIRE(note != std::string::npos);
        const std::string before = kept.substr(0, note);
        const std::string after = kept.substr(kept.find("]\n", note) + 2);
        const std::size_t left = std::stoul(kept.substr(note + 11));
        // Nothing lost: what the note counts is what neither side shows.
        CHECK(before.size() + left + after.size() == all.size());
        CHECK(all.compare(0, before.size(), before) == 0);
        CHECK(all.compare(all.size() - after.size(), after.size(), after) == 0);
    }
}

TEST_CASE("open fails early when the file cannot be created")
{
    const TempDir tmp;
    const std::vector<pto::Job> specs = {spec(1, "a")};
    JunitReport missing_dir((tmp.path() / "no" / "such" / "r.xml").string(), specs, "s");
    auto r = missing_dir.open();
    REQUIRE(!r);
    CHECK(r.error().sys_errno == ENOENT);
    CHECK(r.error().message.find("r.xml") != std::string::npos);

    JunitReport dir(tmp.path().string(), specs, "s");  // a directory
    CHECK(!dir.open());

    JunitReport unopened((tmp.path() / "u.xml").string(), specs, "s");
    CHECK(!unopened.close(0));
    CHECK(!fs::exists(tmp.path() / "u.xml"));
}

TEST_CASE("an old report is replaced whole; a symlink to it stays a symlink")
{
    const TempDir tmp;
    const std::vector<pto::Job> specs = {spec(1, "a"), spec(2, "b")};
    const fs::path real = tmp.path() / "real.xml";
    const fs::path link = tmp.path() / "link.xml";
    std::ofstream(real) << "old report";
    fs::create_symlink(real, link);

    JunitReport junit(link.string(), specs, "s");
    REQUIRE(junit.open());
    CHECK(slurp(real) == "old report");  // untouched until close
    JobOutput out;
    out.append("hi");
    junit.on_finish(specs[0], result(specs[0], JobStatus::passed, 0), out);
    // Job b is never reported: the run ended first.
    REQUIRE(junit.close(3));
    CHECK(fs::is_symlink(link));
    REQUIRE(parse_back(real, tmp.path()) == 0);
    CHECK(slurp(tmp.path() / "suite") == "2 0 0 1 s");
    CHECK(slurp(tmp.path() / "1.kind") == "skipped|not started");
    CHECK(!junit.close(3));  // once only
}

TEST_CASE("abandoned without close: the temporary is removed, the old report kept")
{
    const TempDir tmp;
    const std::vector<pto::Job> specs = {spec(1, "a")};
    const fs::path file = tmp.path() / "r.xml";
    std::ofstream(file) << "old";
    {
        JunitReport junit(file.string(), specs, "s");
        REQUIRE(junit.open());
        std::size_t n = 0;
        for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.path()))
            ++n;
        CHECK(n == 2);  // r.xml and the hidden temporary
    }
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.path()))
        ++n;
    CHECK(n == 1);
    CHECK(slurp(file) == "old");
}

TEST_CASE("a FIFO is written in place, not renamed over")
{
    const TempDir tmp;
    const fs::path fifo = tmp.path() / "fifo";
    const fs::path copy = tmp.path() / "copy.xml";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    const pid_t reader = fork();
    REQUIRE(reader >= 0);
    if (reader == 0) {
        // cat fifo > copy, without a shell.
        const int in = ::open(fifo.c_str(), O_RDONLY | O_CLOEXEC);
        const int out = ::open(copy.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (in < 0 || out < 0)
            _exit(1);
        char buf[4096];
        for (;;) {
            const ssize_t n = read(in, buf, sizeof buf);
            if (n == 0)
                _exit(0);
            if (n < 0 || write(out, buf, static_cast<std::size_t>(n)) != n)
                _exit(2);
        }
    }
    const std::vector<pto::Job> specs = {spec(1, "a")};
    {
        JunitReport junit(fifo.string(), specs, "s");
        REQUIRE(junit.open());
        junit.on_cancel(specs[0], result(specs[0], JobStatus::cancelled, std::nullopt));
        REQUIRE(junit.close(0));
    }
    int status = 0;
    REQUIRE(waitpid(reader, &status, 0) == reader);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    struct stat st{};
    REQUIRE(lstat(fifo.c_str(), &st) == 0);
    CHECK(S_ISFIFO(st.st_mode));
    REQUIRE(parse_back(copy, tmp.path()) == 0);
    CHECK(slurp(tmp.path() / "suite") == "1 0 0 1 s");
}

TEST_CASE("a full $TMPDIR loses that job's output, not the report")
{
    const TempDir tmp;
    const std::vector<pto::Job> specs = {spec(1, "big"), spec(2, "small")};
    const fs::path file = tmp.path() / "r.xml";
    // RLIMIT_FSIZE stands in for a full disk; the spool is the only file
    // that grows before close(), so the limit is lifted for it.
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        std::signal(SIGXFSZ, SIG_IGN);
        JunitReport junit(file.string(), specs, "s");
        if (!junit.open())
            _exit(10);
        rlimit lim{};
        getrlimit(RLIMIT_FSIZE, &lim);
        const rlimit small{100000, lim.rlim_max};
        if (setrlimit(RLIMIT_FSIZE, &small) != 0)
            _exit(11);
        JobOutput big;  // memory only: the limit hit is the report's
        big.append(std::string(200000, 'x'));
        junit.on_finish(specs[0], result(specs[0], JobStatus::passed, 0), big);
        JobOutput little;
        little.append("fine");
        junit.on_finish(specs[1], result(specs[1], JobStatus::passed, 0), little);
        if (!junit.error() || junit.error()->sys_errno != EFBIG)
            _exit(12);
        if (setrlimit(RLIMIT_FSIZE, &lim) != 0)
            _exit(13);
        if (!junit.close(1))
            _exit(14);
        _exit(0);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    REQUIRE(parse_back(file, tmp.path()) == 0);
    CHECK(slurp(tmp.path() / "0.out").empty());
    CHECK(slurp(tmp.path() / "0.err").find("File too large") != std::string::npos);
    CHECK(slurp(tmp.path() / "1.out") == "fine");
}

}  // TEST_SUITE
