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
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "report/log_dir.hpp"

#include "scratch_dir.hpp"

namespace fs = std::filesystem;
using pto::JobOutput;
using pto::JobResult;
using pto::JobStatus;
using pto::report::LogDir;
using pto::report::log_file_names;
using pto::report::safe_file_name;

namespace {

// The tests name their scratch directory after the report they write.
struct TempDir : pto::test::ScratchDir {
    TempDir() : ScratchDir("pto-par-logdir") {}
};

std::vector<pto::Job> specs_for(const std::vector<std::string>& labels)
{
    std::vector<pto::Job> specs;
    for (std::size_t i = 0; i < labels.size(); ++i) {
        pto::Job s;
        s.seq = i + 1;
        s.line = i + 1;
        s.label = labels[i];
        s.command = "true";
        specs.push_back(s);
    }
    return specs;
}

JobResult result_for(const pto::Job& spec, JobStatus status)
{
    JobResult r;
    r.index = spec.seq - 1;
    r.label = spec.label;
    r.status = status;
    r.exit_code = status == JobStatus::passed ? 0 : 1;
    r.pid = 1000 + static_cast<int>(spec.seq);
    return r;
}

std::string slurp(const fs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::set<std::string> entries(const fs::path& dir)
{
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir))
        names.insert(e.path().filename().string());
    return names;
}

bool name_is_safe(const std::string& name)
{
    if (name.empty() || name.front() == '.' || name.size() > pto::report::max_log_name)
        return false;
    for (const char c : name)
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '+' || c == '-'))
            return false;
    return true;
}

}  // namespace

TEST_SUITE("log_dir") {

TEST_CASE("safe names: no slash, no dot files, only the portable characters")
{
    CHECK(safe_file_name("test_add") == "test_add");
    CHECK(safe_file_name("ok-name_1.2+x") == "ok-name_1.2+x");
    CHECK(safe_file_name("..") == "_..");
    CHECK(safe_file_name(".") == "_.");
    CHECK(safe_file_name(".hidden") == "_.hidden");
    CHECK(safe_file_name("a/../../b") == "a_.._.._b");
    CHECK(safe_file_name("/etc/passwd") == "_etc_passwd");
    CHECK(safe_file_name("a b\tc\nd") == "a_b_c_d");
    CHECK(safe_file_name("") == "_");
    CHECK(safe_file_name("\xe6\xb5\x8b") == "___");  // UTF-8 becomes underscores, byte for byte
    CHECK(safe_file_name(std::string(300, 'x')).size() == pto::report::max_log_name);
    CHECK(safe_file_name("." + std::string(300, 'x')).size() == pto::report::max_log_name);
    for (const char* label : {"..", ".", "a/../../b", "/etc/passwd", ".hidden", "\x01\xff", "$(rm -rf /)"})
        CHECK_MESSAGE(name_is_safe(safe_file_name(label)), label);
}

TEST_CASE("names stay unique: the label that had to change takes -<seq>")
{
    auto names = log_file_names(specs_for({"a/b", "a_b"}));
    CHECK(names == std::vector<std::string>{"a_b-1.log", "a_b.log"});

    names = log_file_names(specs_for({"a_b", "a/b"}));
    CHECK(names == std::vector<std::string>{"a_b.log", "a_b-2.log"});

    names = log_file_names(specs_for({"a/b", "a:b", "a b"}));
    CHECK(names == std::vector<std::string>{"a_b-1.log", "a_b-2.log", "a_b-3.log"});

    // A label that is literally the suffixed name.
    names = log_file_names(specs_for({"a/b", "a:b", "a_b-1"}));
    CHECK(names == std::vector<std::string>{"a_b-1-1.log", "a_b-2.log", "a_b-1.log"});

    // Truncated long labels that agree on their first 100 bytes.
    names = log_file_names(specs_for({std::string(150, 'x') + "1", std::string(150, 'x') + "2"}));
    CHECK(names[0] == std::string(100, 'x') + "-1.log");
    CHECK(names[1] == std::string(100, 'x') + "-2.log");

    // Changed labels with no one to meet keep their plain safe name.
    names = log_file_names(specs_for({"..", ".", "a/../../b", "/etc/passwd", ".hidden"}));
    CHECK(names == std::vector<std::string>{"_...log", "_..log", "a_.._.._b.log", "_etc_passwd.log", "_.hidden.log"});
}

TEST_CASE("many colliding labels all get distinct names")
{
    std::vector<std::string> labels;
    for (const char* a : {"x", "x/", "x:", "x_", "x?", "x_-3", "x_-4", "x_-3-3"})
        labels.emplace_back(a);
    const auto names = log_file_names(specs_for(labels));
    CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
    for (const auto& n : names)
        CHECK_MESSAGE(name_is_safe(n), n);
}

TEST_CASE("open creates the directory and its parents; logs hold the whole output; nothing outside")
{
    const TempDir tmp;
    const fs::path dir = tmp.path() / "x" / "y" / "logs";
    const auto specs = specs_for({"..", ".", "a/../../b", "/etc/passwd", ".hidden", "a/b", "a_b", "never"});
    LogDir logs(dir.string(), specs);
    REQUIRE(logs.open());
    CHECK(fs::is_directory(dir));

    std::vector<std::string> outputs;
    for (std::size_t i = 0; i + 1 < specs.size(); ++i) {
        std::string bytes = "output of " + specs[i].label + "\n";
        bytes += std::string("\0\xff no newline", 13);
        outputs.push_back(bytes);
        JobOutput out;
        out.append(bytes);
        logs.on_finish(specs[i], result_for(specs[i], i % 2 ? JobStatus::failed : JobStatus::passed), out);
    }
    // The last one never started.
    logs.on_cancel(specs.back(), result_for(specs.back(), JobStatus::cancelled));
    CHECK(!logs.error());

    const auto names = log_file_names(specs);
    std::set<std::string> expected;
    for (std::size_t i = 0; i + 1 < specs.size(); ++i) {
        expected.insert(names[i]);
        CHECK(logs.path_for(i) == (dir / names[i]).string());
        CHECK(slurp(dir / names[i]) == outputs[i]);
    }
    CHECK(entries(dir) == expected);
    // Nothing escaped DIR: its ancestors hold only the path down to it.
    CHECK(entries(tmp.path()) == std::set<std::string>{"x"});
    CHECK(entries(tmp.path() / "x") == std::set<std::string>{"y"});
    CHECK(entries(tmp.path() / "x" / "y") == std::set<std::string>{"logs"});
    CHECK(!fs::exists(dir / names.back()));
}

TEST_CASE("an existing log is replaced, and a planted symlink is not followed")
{
    const TempDir tmp;
    const fs::path dir = tmp.path() / "logs";
    fs::create_directory(dir);
    const auto specs = specs_for({"old", "linked"});
    {
        std::ofstream(dir / "old.log") << "a much longer previous content\n";
        std::ofstream(tmp.path() / "outside") << "precious\n";
        fs::create_symlink(tmp.path() / "outside", dir / "linked.log");
    }
    LogDir logs(dir.string(), specs);
    REQUIRE(logs.open());  // an existing directory is fine
    for (const auto& s : specs) {
        JobOutput out;
        out.append("new " + s.label);
        logs.on_finish(s, result_for(s, JobStatus::passed), out);
    }
    CHECK(!logs.error());
    CHECK(slurp(dir / "old.log") == "new old");
    CHECK(!fs::is_symlink(dir / "linked.log"));
    CHECK(slurp(dir / "linked.log") == "new linked");
    CHECK(slurp(tmp.path() / "outside") == "precious\n");
}

TEST_CASE("outputs past the memory limit are streamed from their spill file")
{
    const TempDir tmp;
    const auto specs = specs_for({"big"});
    LogDir logs((tmp.path() / "logs").string(), specs);
    REQUIRE(logs.open());
    auto out = *JobOutput::reserve(pto::SpillPlace{}, 4096);
    std::string all;
    for (int i = 0; i < 3000; ++i) {
        const std::string line = "line " + std::to_string(i) + std::string(i % 97, '#') + "\n";
        all += line;
        out.append(line);
    }
    logs.on_finish(specs[0], result_for(specs[0], JobStatus::passed), out);
    CHECK(!logs.error());
    CHECK(slurp(tmp.path() / "logs" / "big.log") == all);
}

TEST_CASE("a directory that cannot be made is an error naming it")
{
    const TempDir tmp;
    std::ofstream(tmp.path() / "file") << "x";
    const auto specs = specs_for({"a"});

    LogDir under_file((tmp.path() / "file" / "logs").string(), specs);
    auto r = under_file.open();
    REQUIRE(!r);
    CHECK(r.error().sys_errno == ENOTDIR);
    CHECK(r.error().message.find((tmp.path() / "file").string()) != std::string::npos);

    LogDir is_file((tmp.path() / "file").string(), specs);
    r = is_file.open();
    REQUIRE(!r);
    CHECK(r.error().sys_errno == ENOTDIR);

    LogDir empty("", specs);
    CHECK(!empty.open());

    // Before open() nothing is written, and nothing crashes.
    LogDir unopened((tmp.path() / "unopened").string(), specs);
    JobOutput out;
    out.append("x");
    unopened.on_finish(specs[0], result_for(specs[0], JobStatus::passed), out);
    CHECK(!fs::exists(tmp.path() / "unopened"));
}

TEST_CASE("a write error (RLIMIT_FSIZE) is kept and the next jobs still get their logs")
{
    const TempDir tmp;
    const fs::path dir = tmp.path() / "logs";
    const auto specs = specs_for({"huge", "small", "also huge"});

    // The limit and the ignored SIGXFSZ (as pto-par's main sets it) stay in
    // a child; doctest's checks cannot, so the child answers by exit code.
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        std::signal(SIGXFSZ, SIG_IGN);
        LogDir logs(dir.string(), specs);
        if (!logs.open())
            _exit(10);
        const rlimit lim{1000, 1000};
        if (setrlimit(RLIMIT_FSIZE, &lim) != 0)
            _exit(11);
        for (const auto& s : specs) {
            JobOutput out;
            out.append(std::string(s.label == "small" ? 10 : 5000, 'x'));
            logs.on_finish(s, result_for(s, JobStatus::passed), out);
        }
        const auto e = logs.error();
        if (!e)
            _exit(12);
        if (e->sys_errno != EFBIG)
            _exit(13);
        if (e->message.find(logs.path_for(0)) == std::string::npos)  // the first failure is kept
            _exit(14);
        _exit(0);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(fs::file_size(dir / "huge.log") == 1000);
    CHECK(slurp(dir / "small.log") == std::string(10, 'x'));
    CHECK(fs::file_size(dir / "also_huge.log") == 1000);
}

}  // TEST_SUITE
