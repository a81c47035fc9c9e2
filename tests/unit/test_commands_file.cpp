#include "cmdfile/commands_file.hpp"

#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

using namespace std::string_literals;
using namespace std::string_view_literals;
using pto::cmdfile::Diagnostic;
using pto::cmdfile::format_diagnostic;
using pto::cmdfile::JobSpec;
using pto::cmdfile::max_command_bytes;
using pto::cmdfile::parse_commands;
using pto::cmdfile::ParseResult;

namespace {

std::string dump(const ParseResult& r) {
    std::string s;
    for (const Diagnostic& d : r.errors) s += format_diagnostic("f", d) + "\n";
    for (const JobSpec& j : r.jobs)
        s += std::to_string(j.seq) + " [" + j.label + "] " + j.command + "\n";
    return s;
}

// Parses text that must be valid.
std::vector<JobSpec> jobs(std::string_view text) {
    ParseResult r = parse_commands(text);
    INFO(dump(r));
    REQUIRE(r.errors.empty());
    return r.jobs;
}

JobSpec one_job(std::string_view text) {
    std::vector<JobSpec> js = jobs(text);
    REQUIRE(js.size() == 1);
    return js.front();
}

std::vector<Diagnostic> errors(std::string_view text) {
    ParseResult r = parse_commands(text);
    INFO(dump(r));
    REQUIRE(!r.errors.empty());
    CHECK(r.jobs.empty());
    return r.errors;
}

Diagnostic one_error(std::string_view text) {
    std::vector<Diagnostic> es = errors(text);
    INFO(format_diagnostic("f", es.front()));
    REQUIRE(es.size() == 1);
    return es.front();
}

// One error at LINE:COL whose message contains every `parts`.
void check_error(std::string_view text, std::size_t line, std::size_t col,
                 std::initializer_list<std::string_view> parts) {
    INFO("input: " << std::string(text));
    const Diagnostic d = one_error(text);
    INFO(format_diagnostic("f", d));
    CHECK(d.line == line);
    CHECK(d.col == col);
    for (std::string_view p : parts) CHECK(d.message.find(p) != std::string::npos);
}

std::vector<std::string> labels(std::string_view text) {
    std::vector<std::string> out;
    for (const JobSpec& j : jobs(text)) out.push_back(j.label);
    return out;
}

std::string default_label(std::string_view command) {
    return one_job(command).label;
}

}  // namespace

TEST_SUITE("commands_file") {

// ---- lines --------------------------------------------------------------

TEST_CASE("a plain line is one job with the defaults") {
    const JobSpec j = one_job("pytest tests/test_add.py --device {devices}\n");
    CHECK(j.seq == 1);
    CHECK(j.line == 1);
    CHECK(j.devices == 1);
    CHECK(!j.timeout_s);
    CHECK(!j.label_given);
    CHECK(j.command == "pytest tests/test_add.py --device {devices}");
}

TEST_CASE("the SPEC example parses as documented") {
    const auto js = jobs(
        "pytest tests/test_add.py --device {devices}            # 1 device (default)\n"
        "@2 pytest tests/test_allreduce.py --device {devices}    # 2 devices\n"
        "@devices=4,label=allgather,timeout=600 ./run_l3.sh\n"
        "@0 ./lint.sh                                            # needs no device\n");
    REQUIRE(js.size() == 4);
    CHECK(js[0].devices == 1);
    CHECK(js[1].devices == 2);
    CHECK(js[2].devices == 4);
    CHECK(js[3].devices == 0);
    CHECK(js[2].label == "allgather");
    CHECK(js[2].label_given);
    REQUIRE(js[2].timeout_s);
    CHECK(*js[2].timeout_s == 600.0);
    CHECK(js[2].command == "./run_l3.sh");
    // Inline '#' belongs to the shell, spacing included.
    CHECK(js[3].command ==
          "./lint.sh                                            # needs no device");
    CHECK(js[0].label == "test_add.py");
    CHECK(js[1].label == "test_allreduce.py");
    CHECK(js[3].label == "lint.sh");
}

TEST_CASE("blank and comment lines are skipped; seq counts jobs, line counts lines") {
    const auto js = jobs("\n   \t\n# comment\n   \t# indented comment\nA\n\n#x\nB\n");
    REQUIRE(js.size() == 2);
    CHECK(js[0].seq == 1);
    CHECK(js[0].line == 5);
    CHECK(js[0].command == "A");
    CHECK(js[1].seq == 2);
    CHECK(js[1].line == 8);
    CHECK(js[1].command == "B");
}

TEST_CASE("empty input and comment-only input give no jobs and no errors") {
    for (std::string_view text : {""sv, "\n"sv, "# only\n  # comments"sv, "\r\n \r\n"sv}) {
        const ParseResult r = parse_commands(text);
        CHECK(r.jobs.empty());
        CHECK(r.errors.empty());
    }
}

TEST_CASE("CRLF and LF line endings, mixed") {
    const auto js = jobs("echo a\r\necho b\n\r\n# c\r\necho c\r\n");
    REQUIRE(js.size() == 3);
    CHECK(js[0].command == "echo a");
    CHECK(js[1].command == "echo b");
    CHECK(js[2].command == "echo c");
    CHECK(js[2].line == 5);
}

TEST_CASE("no newline at the end of the file") {
    const auto js = jobs("echo a\necho b");
    REQUIRE(js.size() == 2);
    CHECK(js[1].command == "echo b");
    CHECK(one_job("echo c\r").command == "echo c");
}

TEST_CASE("the command keeps its inner spacing; outer blanks go") {
    CHECK(one_job("   echo  a \t  b  \t \n").command == "echo  a \t  b");
    CHECK(one_job("\techo '  x  '   ").command == "echo '  x  '");
}

TEST_CASE("inline '#' is not a comment") {
    CHECK(one_job("echo a # b\n").command == "echo a # b");
    CHECK(one_job("echo a#b").command == "echo a#b");
}

TEST_CASE("a UTF-8 byte order mark at the start is not part of the command") {
    const JobSpec j = one_job("\xEF\xBB\xBF@2 echo x\n");
    CHECK(j.devices == 2);
    CHECK(j.command == "echo x");
    // Columns still count the file's bytes.
    check_error("\xEF\xBB\xBF@ echo", 1, 4, {"empty directive"});
}

// ---- continuation -------------------------------------------------------

TEST_CASE("a trailing backslash joins the next line as is") {
    const auto js = jobs("echo a \\\n  b\nnext\n");
    REQUIRE(js.size() == 2);
    CHECK(js[0].command == "echo a   b");
    CHECK(js[0].line == 1);
    CHECK(js[1].line == 3);
    CHECK(js[1].seq == 2);
}

TEST_CASE("continuation over several lines with CRLF") {
    const auto js = jobs("echo a\\\r\nb\\\r\nc\r\nnext\r\n");
    REQUIRE(js.size() == 2);
    CHECK(js[0].command == "echo abc");
    CHECK(js[1].command == "next");
    CHECK(js[1].line == 4);
}

TEST_CASE("a continued line that looks like a comment is part of the command") {
    CHECK(one_job("echo a \\\n# not a comment\n").command == "echo a # not a comment");
    CHECK(one_job("echo a \\\n   #x \\\n y").command == "echo a    #x  y");
}

TEST_CASE("a comment line never continues") {
    const auto js = jobs("# comment \\\necho a\n  # again\\\r\necho b");
    REQUIRE(js.size() == 2);
    CHECK(js[0].command == "echo a");
    CHECK(js[0].line == 2);
    CHECK(js[1].command == "echo b");
    CHECK(js[1].line == 4);
}

TEST_CASE("an escaped backslash at the end does not continue, like sh") {
    const auto js = jobs("echo a\\\\\nb\necho c\\\\\\\nd\n");
    REQUIRE(js.size() == 3);
    CHECK(js[0].command == "echo a\\\\");
    CHECK(js[1].command == "b");
    CHECK(js[2].command == "echo c\\\\d");
    CHECK(js[2].line == 3);
}

TEST_CASE("a backslash followed by blanks is not a continuation") {
    const auto js = jobs("echo a\\ \nb\n");
    REQUIRE(js.size() == 2);
    CHECK(js[0].command == "echo a\\");
}

TEST_CASE("continuation onto an empty line ends the job there") {
    const auto js = jobs("echo a \\\n\nb\n");
    REQUIRE(js.size() == 2);
    CHECK(js[0].command == "echo a");
    CHECK(js[1].line == 3);
}

TEST_CASE("continuation of nothing but blanks makes no job") {
    const auto js = jobs("   \\\n   \nb\n");
    REQUIRE(js.size() == 1);
    CHECK(js[0].command == "b");
}

TEST_CASE("a backslash on the last line continues nothing") {
    check_error("echo a \\", 1, 8, {"backslash at end of file continues nothing"});
    check_error("x\necho \\\n", 2, 6, {"backslash at end of file"});
    check_error("x\r\necho \\\r\n", 2, 6, {"backslash at end of file"});
    check_error("echo \\\na\\\n", 2, 2, {"backslash at end of file"});
}

TEST_CASE("a directive may span a continuation") {
    const JobSpec j = one_job("@2,\\\nlabel=x cmd\n");
    CHECK(j.devices == 2);
    CHECK(j.label == "x");
    CHECK(j.line == 1);
    CHECK(j.command == "cmd");
}

// ---- directives ---------------------------------------------------------

TEST_CASE("a bare number is the device count") {
    CHECK(one_job("@2 cmd").devices == 2);
    CHECK(one_job("@0 ./lint.sh").devices == 0);
    CHECK(one_job("@007 x").devices == 7);
    CHECK(one_job("@65536 x").devices == 65536);
    CHECK(one_job("@devices=65536 x").devices == 65536);
    CHECK(one_job("@devices=3 x").devices == 3);
}

TEST_CASE("directive items combine in any order") {
    const JobSpec j = one_job("@label=A,timeout=1.5,3 run it");
    CHECK(j.devices == 3);
    CHECK(j.label == "A");
    CHECK(j.label_given);
    REQUIRE(j.timeout_s);
    CHECK(*j.timeout_s == 1.5);
    CHECK(j.command == "run it");

    const JobSpec k = one_job("@1,label=B x");
    CHECK(k.devices == 1);
    CHECK(k.label == "B");
}

TEST_CASE("the directive may follow blanks and be followed by tabs") {
    const JobSpec j = one_job("  \t@3\t \tcmd  x\n");
    CHECK(j.devices == 3);
    CHECK(j.command == "cmd  x");
}

TEST_CASE("timeout takes what --timeout takes, exponents included") {
    CHECK(*one_job("@timeout=1e9 x").timeout_s == 1e9);
    CHECK(*one_job("@timeout=2.5E3 x").timeout_s == 2500.0);
}

TEST_CASE("timeout accepts plain decimals") {
    CHECK(*one_job("@timeout=600 x").timeout_s == 600.0);
    CHECK(*one_job("@timeout=1.5 x").timeout_s == 1.5);
    CHECK(*one_job("@timeout=0.001 x").timeout_s == doctest::Approx(0.001));
    CHECK(*one_job("@timeout=.5 x").timeout_s == 0.5);
}

TEST_CASE("labels may hold any printable bytes but whitespace and commas") {
    CHECK(one_job("@label=a/b:c\"d x").label == "a/b:c\"d");
    CHECK(one_job("@label=t\xC3\xABst x").label == "t\xC3\xABst");
}

TEST_CASE("directive errors point at the offending item") {
    check_error("@ cmd", 1, 1, {"empty directive '@'", "'@2'"});
    check_error("  @2,,label=x cmd", 1, 6, {"empty item in directive '@2,,label=x'"});
    check_error("@2, cmd", 1, 4, {"empty item"});
    check_error("@,2 cmd", 1, 2, {"empty item"});
    check_error("@foo=1 cmd", 1, 2,
                {"unknown directive key 'foo'", "devices", "label", "timeout"});
    check_error("@2,gpus=1 cmd", 1, 4, {"unknown directive key 'gpus'"});
    check_error("@bar cmd", 1, 2,
                {"unknown directive item 'bar'", "device count", "key=value",
                 "devices, slots, label, timeout, ports and retries"});
    check_error("@label cmd", 1, 2, {"directive key 'label' needs a value", "'label=...'"});
    check_error("@=3 cmd", 1, 2, {"missing key before '='", "'=3'"});
}

TEST_CASE("slots=S takes part of one device, and goes with no device count") {
    const auto j = one_job("@slots=2,label=small x");
    CHECK(j.slots == 2);
    CHECK(j.devices == 1);
    CHECK(one_job("@1 x").slots == 0);
    check_error("@slots=0 cmd", 1, 2, {"invalid slot count '0'", "'@0'"});
    check_error("@slots=x cmd", 1, 2, {"invalid slot count 'x'; expected an integer from 1 to 1024"});
    check_error("@2,slots=1 cmd", 1, 1, {"slots=1 takes slots of one device; it cannot go with a device count"});
}

TEST_CASE("a key given twice is an error at the second occurrence") {
    check_error("@2,devices=3 cmd", 1, 4,
                {"directive key 'devices' given twice in '@2,devices=3'"});
    check_error("@devices=1,5 cmd", 1, 12, {"'devices' given twice"});
    check_error("@label=a,label=b x", 1, 10, {"'label' given twice"});
    check_error("@timeout=1,timeout=1 x", 1, 12, {"'timeout' given twice"});
}

TEST_CASE("bad device counts") {
    for (std::string_view bad : {"x"sv, "-1"sv, "+1"sv, "1.5"sv, "65537"sv,
                                 "99999999999999999999"sv, ""sv, "2a"sv}) {
        const std::string text = "@devices=" + std::string(bad) + " cmd";
        check_error(text, 1, 2,
                    {"invalid device count '" + std::string(bad) + "'",
                     "expected an integer from 0 to 65536"});
    }
    check_error("@-1 cmd", 1, 2, {"invalid device count '-1'"});
    check_error("@+2 cmd", 1, 2, {"invalid device count '+2'"});
    check_error("@label=x,65537 cmd", 1, 10, {"invalid device count '65537'"});
}

TEST_CASE("bad labels") {
    check_error("@label= x", 1, 2, {"empty label", "without whitespace or commas"});
    check_error("@2,label=a\x01z x", 1, 4,
                {"label 'a\\x01z'", "control character"});
    check_error("@label=a\x7f x", 1, 2, {"control character"});
}

TEST_CASE("bad timeouts") {
    for (std::string_view bad : {"0"sv, "0.0"sv, "-1"sv, "+1"sv, "abc"sv, "inf"sv,
                                 "nan"sv, "1e400"sv, ""sv, "."sv, "1..2"sv, "1.2.3"sv,
                                 "0x10"sv, "5s"sv}) {
        const std::string text = "@3,timeout=" + std::string(bad) + " cmd";
        check_error(text, 1, 4,
                    {"invalid timeout '" + std::string(bad) + "'",
                     "expected a number of seconds > 0"});
    }
    // Overflows a double instead of becoming infinity.
    check_error("@timeout=1" + std::string(400, '0') + " x", 1, 2, {"invalid timeout"});
}

TEST_CASE("a directive without a command") {
    check_error("@2", 1, 3, {"directive '@2' is not followed by a command"});
    check_error("@2   \n", 1, 3, {"not followed by a command"});
    check_error("  @2,label=x\t\r\n", 1, 13, {"directive '@2,label=x'"});
    check_error("ok\n@0 \\\n\n", 2, 3, {"not followed by a command"});
}

TEST_CASE("every error of a line is reported, left to right") {
    const auto es = errors("@foo=1,devices=x");
    REQUIRE(es.size() == 3);
    CHECK(es[0].col == 2);
    CHECK(es[0].message.find("unknown directive key 'foo'") != std::string::npos);
    CHECK(es[1].col == 8);
    CHECK(es[1].message.find("invalid device count 'x'") != std::string::npos);
    CHECK(es[2].col == 17);
    CHECK(es[2].message.find("not followed by a command") != std::string::npos);
}

TEST_CASE("errors on a continued line point at the physical line") {
    check_error("@2,\\\nfoo=1 cmd", 2, 1, {"unknown directive key 'foo'"});
    // Joined as is: the blanks end the directive word after its comma.
    check_error("@2,\\\n  foo=1 cmd", 2, 1, {"empty item in directive '@2,'"});
    check_error("echo\n@2,\\\r\nlabel=x,\\\r\nbad=1 cmd", 4, 1, {"'bad'"});
}

TEST_CASE("errors of the whole file in file order, and then no jobs") {
    const ParseResult r = parse_commands("ok 1\n@x a\nok 2\n\n@2,,label=q b\n@label=\n");
    CHECK(r.jobs.empty());
    REQUIRE(r.errors.size() == 4);
    CHECK(r.errors[0].line == 2);
    CHECK(r.errors[1].line == 5);
    CHECK(r.errors[1].col == 4);
    CHECK(r.errors[2].line == 6);
    CHECK(r.errors[2].col == 2);
    CHECK(r.errors[3].line == 6);
    CHECK(r.errors[3].col == 8);
}

TEST_CASE("messages start in lowercase and quote what they name") {
    for (std::string_view bad : {"@ x"sv, "@2,, x"sv, "@k=1 x"sv, "@k x"sv, "@2,2 x"sv,
                                 "@x=y x"sv, "@timeout=0 x"sv, "@2"sv, "x\\"sv}) {
        for (const Diagnostic& d : errors(bad)) {
            INFO(d.message);
            REQUIRE(!d.message.empty());
            CHECK(d.message.front() >= 'a');
            CHECK(d.message.front() <= 'z');
        }
    }
}

TEST_CASE("long quoted text is shortened in messages") {
    const std::string key(1000, 'k');
    const Diagnostic d = one_error("@" + key + "=1 x");
    CHECK(d.message.find("...'") != std::string::npos);
    CHECK(d.message.size() < 200);
}

// ---- labels -------------------------------------------------------------

TEST_CASE("explicit labels must be unique") {
    check_error("@label=x a\n@label=y b\n\n@2,label=x c\n", 4, 4,
                {"duplicate label 'x' (first used on line 1)"});
    check_error("a\n@label=x,\\\n2 a\n@label=x b\n", 4, 2, {"(first used on line 2)"});
}

TEST_CASE("default labels follow the documented rule") {
    CHECK(default_label("pytest tests/test_add.py --device {devices}") == "test_add.py");
    CHECK(default_label("@0 ./lint.sh") == "lint.sh");
    CHECK(default_label("./run_l3.sh") == "run_l3.sh");
    CHECK(default_label("FOO=1 python3 -m pytest x") == "python3");
    CHECK(default_label("FOO=1 BAR=a/b ./run_l3.sh --n 3") == "run_l3.sh");
    CHECK(default_label("sleep 1") == "sleep");
    CHECK(default_label("/usr/bin/env python3 x") == "env");
    CHECK(default_label("python3.11 -c pass") == "python3.11");
    CHECK(default_label("run 3.14") == "run");
    CHECK(default_label("python3 -m pytest test_add.py -q") == "test_add.py");
    CHECK(default_label("bash run.sh") == "run.sh");
    // An argument that names a file beats the program, even a path-like one.
    CHECK(default_label("examples/fake_pytest tests/test_add.py --device 0") == "test_add.py");
    CHECK(default_label("./run_l3.sh --config cfg/l3.yaml") == "l3.yaml");
}

TEST_CASE("default labels skip options when looking for a file") {
    CHECK(default_label("pytest --rootdir=/tmp -k name tests/test_x.py") == "test_x.py");
    CHECK(default_label("pytest -x tests/") == "tests");
}

TEST_CASE("default labels ignore quotes and shell punctuation around words") {
    CHECK(default_label("(cd sub && ./go.sh)") == "go.sh");
    CHECK(default_label("sh -c 'tests/t.sh; echo'") == "t.sh");
    CHECK(default_label("\"my prog\" x") == "my");
}

TEST_CASE("default labels are made of safe bytes, 48 at most") {
    CHECK(default_label("cmd:with$weird x") == "cmd_with_weird");
    CHECK(default_label("t\xC3\xABst") == "t__st");
    CHECK(default_label(std::string(60, 'a') + " x") == std::string(48, 'a'));
    CHECK(default_label("dir/" + std::string(50, 'b') + ".py") ==
          std::string(48, 'b'));
    CHECK(default_label("/ x") == "job");
    CHECK(default_label("FOO=1") == "job");
    CHECK(default_label("@2 ;") == "job");
}

TEST_CASE("default labels are unique, suffixed with the job's seq") {
    CHECK(labels("sleep 1\nsleep 1\n# c\n\nsleep 2\n") ==
          std::vector<std::string>{"sleep", "sleep-2", "sleep-3"});
}

TEST_CASE("default labels avoid explicit labels, even later ones") {
    CHECK(labels("sleep 1\n@label=sleep sleep 2\n") ==
          std::vector<std::string>{"sleep-1", "sleep"});
    CHECK(labels("sleep 1\nsleep 2\n@label=sleep-2 x\n") ==
          std::vector<std::string>{"sleep", "sleep-2-2", "sleep-2"});
}

TEST_CASE("default labels avoid earlier defaults that look suffixed") {
    CHECK(labels("sleep 1\nsleep-3 a\nsleep 2\n") ==
          std::vector<std::string>{"sleep", "sleep-3", "sleep-3-3"});
}

TEST_CASE("an explicit label is kept as given even if it looks like a default") {
    const auto js = jobs("@label=job-1 a\n/ x\n");
    REQUIRE(js.size() == 2);
    CHECK(js[0].label == "job-1");
    CHECK(js[0].label_given);
    CHECK(js[1].label == "job");
    CHECK(!js[1].label_given);
}

// ---- limits -------------------------------------------------------------

TEST_CASE("the command length limit is MAX_ARG_STRLEN minus the NUL") {
    REQUIRE(max_command_bytes == 131072);
    const std::string fits(max_command_bytes - 1, 'x');
    CHECK(one_job(fits + "\n").command.size() == 131071);
    CHECK(one_job("@2 " + fits + "  \t\r\n").command.size() == 131071);

    const std::string too_long(max_command_bytes, 'x');
    check_error(too_long, 1, 1,
                {"command is 131072 bytes; the kernel limit for one argument is "
                 "131072 bytes"});
    check_error("ok\n@2  " + too_long + "1\n", 2, 5, {"command is 131073 bytes"});
}

TEST_CASE("InputCheck stops at the first NUL byte or over-long line, wherever the pieces end") {
    using pto::cmdfile::InputCheck;
    InputCheck nul;
    CHECK(!nul.feed("ab\nc"));
    const auto d = nul.feed("d\0e"sv);
    REQUIRE(d);
    CHECK(d->line == 2);
    CHECK(d->col == 3);
    CHECK(d->message == "NUL byte in commands file");

    using pto::cmdfile::max_line_bytes;
    InputCheck long_line;
    CHECK(!long_line.feed("ok\n" + std::string(max_line_bytes - 1, 'x')));
    CHECK(!long_line.feed("x"));
    const auto over = long_line.feed("xx\n");
    REQUIRE(over);
    CHECK(over->line == 2);
    CHECK(over->col == max_line_bytes + 1);
    CHECK(over->message.find("line is longer than 262144 bytes") != std::string::npos);
    CHECK(over->message.find("131071") != std::string::npos);
    CHECK(long_line.line_breaks() == 1);

    // Long files of short lines are fine: only a line is bounded.
    InputCheck many;
    const std::string line(1000, 'y');
    for (int i = 0; i < 1000; ++i) CHECK(!many.feed(line + "\n"));
    CHECK(many.line_breaks() == 1000);
}

TEST_CASE("InputCheck caps the file in lines and in bytes, counting exactly") {
    using pto::cmdfile::InputCheck;
    using pto::cmdfile::max_file_bytes;
    using pto::cmdfile::max_file_lines;
    InputCheck lines;
    CHECK(!lines.feed(std::string(max_file_lines, '\n')));
    const auto one_more = lines.feed("x");
    REQUIRE(one_more);
    CHECK(one_more->line == max_file_lines + 1);
    CHECK(one_more->message.find("more than 1000000 lines") != std::string::npos);

    InputCheck bytes;
    std::string piece;
    while (piece.size() < (1u << 20))
        piece += std::string(1023, 'y') + "\n";
    for (std::size_t i = 0; i < max_file_bytes / piece.size(); ++i)
        CHECK(!bytes.feed(piece));
    const auto over = bytes.feed("z");
    REQUIRE(over);
    CHECK(over->message.find("larger than 128 MiB") != std::string::npos);
}

TEST_CASE("a NUL byte is the one error of the file") {
    check_error("a\nb\0c\n\0\n@x y\n"sv, 2, 2, {"NUL byte in commands file"});
    check_error("\0"sv, 1, 1, {"NUL byte"});
    check_error("@x\n\r\n  \0"sv, 3, 3, {"NUL byte"});
}

TEST_CASE("at most 20 errors, then one saying so") {
    std::string text;
    for (int i = 0; i < 30; ++i) text += "@x y\n";
    const auto es = errors(text);
    REQUIRE(es.size() == 21);
    for (std::size_t i = 0; i < 20; ++i) {
        CHECK(es[i].line == i + 1);
        CHECK(es[i].message.find("unknown directive item 'x'") != std::string::npos);
    }
    CHECK(es[20].line == 21);
    CHECK(es[20].col == 2);
    CHECK(es[20].message == "too many errors, stopping");
}

TEST_CASE("exactly 20 errors are all reported, without the stop notice") {
    std::string text;
    for (int i = 0; i < 20; ++i) text += "ok\n@x y\n";
    const auto es = errors(text);
    REQUIRE(es.size() == 20);
    CHECK(es.back().line == 40);
    CHECK(es.back().message.find("too many") == std::string::npos);
}

TEST_CASE("the error cap counts errors, not lines") {
    std::string text;
    for (int i = 0; i < 10; ++i) text += "@a,b,c y\n";
    const auto es = errors(text);
    REQUIRE(es.size() == 21);
    CHECK(es[20].line == 7);
    CHECK(es[20].col == 6);
    CHECK(es[20].message == "too many errors, stopping");
}

// ---- format -------------------------------------------------------------

TEST_CASE("format_diagnostic is compiler-style") {
    CHECK(format_diagnostic("tests.cmds", {3, 7, "unknown directive key 'x'"}) ==
          "tests.cmds:3:7: error: unknown directive key 'x'");
    CHECK(format_diagnostic("-", {1, 1, "m"}) == "-:1:1: error: m");
    const Diagnostic d = one_error("ok\n  @2,,label=q x\n");
    CHECK(format_diagnostic("dir/a.cmds", d).starts_with("dir/a.cmds:2:6: error: empty item"));
}

}  // TEST_SUITE
