#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>

#include <cstdlib>
#include <filesystem>

#include "process.hpp"

using namespace pto::test;
using namespace std::chrono_literals;

namespace {

// Python's parser is the judge of well-formed XML (meson needs python3).
bool well_formed_xml(const std::string& path)
{
    const std::string cmd = "python3 -c 'import sys,xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' '" + path + "'";
    return std::system(cmd.c_str()) == 0;
}

}  // namespace

TEST_SUITE("reports") {

TEST_CASE("--junit: one testcase per job, well-formed whatever the jobs printed")
{
    TempDir dir;
    const auto xml = dir.file("report.xml");
    const auto file = dir.write("suite.cmds",
                                "@0,label=ok echo fine\n"
                                "@0,label=hostile printf 'a\\001b]]>c<d&e\\377\\000f'; exit 2\n"
                                "@0,label=crash kill -SEGV $$\n");
    const auto r = run({pto_par(), "-d", "none", "-j", "1", "--junit", xml, file});
    CHECK(r.exit_code == 1);
    REQUIRE(std::filesystem::exists(xml));
    CHECK(well_formed_xml(xml));
    const auto text = dir.read("report.xml");
    CHECK(text.find("<testsuite name=\"suite\" tests=\"3\" failures=\"2\"") != std::string::npos);
    CHECK(text.find("<testcase name=\"ok\"") != std::string::npos);
    CHECK(text.find("<failure message=\"exit code 2\"") != std::string::npos);
    CHECK(text.find("SIGSEGV") != std::string::npos);
    CHECK(text.find("]]&gt;c&lt;d&amp;e") != std::string::npos);
}

TEST_CASE("--junit-output-limit: a job printing 60 MB of NULs gives a small report; --log-dir keeps it all")
{
    TempDir dir;
    const auto xml = dir.file("r.xml");
    const auto logs = dir.file("logs");
    const auto r = run({pto_par(), "-d", "none", "--output", "none", "--junit", xml, "--junit-output-limit", "64K",
                        "--log-dir", logs,
                        dir.write("z.cmds", "@0,label=zeros echo first; head -c 60000000 /dev/zero; echo; echo last\n")},
                       {}, {}, 120s);
    CHECK(r.exit_code == 0);
    CHECK(std::filesystem::file_size(xml) < 400 * 1024);
    const auto report = dir.read("r.xml");
    CHECK(report.find("first") != std::string::npos);
    CHECK(report.find("last") != std::string::npos);
    CHECK(report.find("[pto-par: 59934476 bytes of output left out]") != std::string::npos);
    CHECK(std::filesystem::file_size(std::filesystem::path(logs) / "zeros.log") == 60000012);
    for (const char* bad : {"4X", "-1", "", "2000G"}) {
        const auto e = run({pto_par(), "-n", "--junit-output-limit", bad, dir.write("t.cmds", "@0 true\n")});
        CHECK(e.exit_code == 2);
        CHECK(e.err.find(std::string("invalid value '") + bad + "' for --junit-output-limit") != std::string::npos);
    }
}

TEST_CASE("--tag: each line of a block is prefixed with its label, the last one ended")
{
    TempDir dir;
    const auto r = run({pto_par(), "-d", "none", "-j", "1", "--tag",
                        dir.write("t.cmds", "@0,label=a printf 'one\\ntwo'\n@0,label=b printf 'x\\n\\ny\\n'\n")});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "[a] one\n[a] two\n[b] x\n[b] \n[b] y\n");
}

TEST_CASE("--junit and --json are written when the run is interrupted")
{
    TempDir dir;
    const auto xml = dir.file("r.xml");
    const auto json = dir.file("r.json");
    Process p({pto_par(), "-d", "none", "-j", "1", "--kill-grace", "0.5", "--junit", xml, "--json", json,
               dir.write("i.cmds", "@0,label=long sleep 60\n@0,label=later true\n")});
    REQUIRE(p.wait_for_stderr("START long", 10s));
    p.send(SIGINT);
    const auto r = p.wait(20s);
    CHECK(r.exit_code == 130);
    CHECK(well_formed_xml(xml));
    const auto text = dir.read("r.xml");
    CHECK(text.find("tests=\"2\"") != std::string::npos);
    CHECK(text.find("<skipped") != std::string::npos);
    CHECK(text.find("<error") != std::string::npos);
    CHECK(lines_with(dir.read("r.json"), "\"label\":").size() == 2);
}

TEST_CASE("--junit into a directory that does not exist fails before anything runs")
{
    TempDir dir;
    const auto marker = dir.file("ran");
    const auto r = run({pto_par(), "-d", "none", "--junit", dir.file("no/such/dir/r.xml"),
                        dir.write("x.cmds", "@0 touch " + marker + "\n")});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("no/such/dir") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("--log-dir: each job's whole output in a file named safely from its label")
{
    TempDir dir;
    const auto logs = dir.file("logs/deeper");
    const auto r = run({pto_par(), "-d", "none", "--log-dir", logs,
                        dir.write("l.cmds", "@0,label=.. echo dots\n@0,label=a/../../b echo sneaky\n@0 printf 'x\\000y'\n")});
    CHECK(r.exit_code == 0);
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(logs))
        names.push_back(e.path().filename().string());
    CHECK(names.size() == 3);
    for (const auto& n : names) {
        CHECK(n.find('/') == std::string::npos);
        CHECK(n != "..");
        CHECK(n.front() != '.');
    }
    // Nothing escaped the log directory.
    CHECK_FALSE(std::filesystem::exists(dir.file("b.log")));
    CHECK_FALSE(std::filesystem::exists(dir.file("logs/b.log")));
    std::string all;
    for (const auto& n : names)
        all += dir.read("logs/deeper/" + n);
    CHECK(all.find("dots\n") != std::string::npos);
    CHECK(all.find("sneaky\n") != std::string::npos);
    CHECK(all.find(std::string("x\0y", 3)) != std::string::npos);
}

TEST_CASE("--log-dir keeps every try: a header per try when a job ran more than once, also after a sick device")
{
    TempDir dir;
    const auto marker = dir.file("tried");
    const auto logs = dir.file("logs");
    const auto r = run({pto_par(), "-d", "0-1", "-j", "1", "--retries", "1", "--log-dir", logs,
                        dir.write("f.cmds", "@1,label=flaky if [ -e " + marker + " ]; then echo second; "
                                            "else touch " + marker + "; printf 'first, no newline'; exit 1; fi\n"
                                            "@1,label=once echo only\n")});
    CHECK(r.exit_code == 0);
    const auto flaky = dir.read("logs/flaky.log");
    CHECK(flaky.find("[pto-par] try 1 of 2: FAIL flaky exit=1 ") == 0);
    CHECK(flaky.find("\nfirst, no newline\n[pto-par] try 2 of 2: PASS flaky exit=0 ") != std::string::npos);
    CHECK(flaky.substr(flaky.size() - 8) == "\nsecond\n");
    // One try: the log is the job's bytes, nothing added.
    CHECK(dir.read("logs/once.log") == "only\n");

    // A try that a sick device failed is kept too.
    const auto broke = dir.file("broke");
    const auto check = dir.write("check.sh", "[ -e " + broke + " ] && [ \"$(cat " + broke +
                                             ")\" = \"$PTO_PAR_DEVICES\" ] && exit 1\nexit 0\n");
    const auto sick = run({pto_par(), "-d", "0-1", "-j", "1", "--device-check", "sh " + check, "--log-dir", logs,
                           dir.write("s.cmds", "@1,label=c if [ ! -e " + broke + " ]; then echo $PTO_PAR_DEVICES > " +
                                               broke + "; echo broken; exit 1; fi; echo fine\n")});
    CHECK(sick.exit_code == 0);
    const auto c = dir.read("logs/c.log");
    CHECK(c.find("[pto-par] try 1 of 2: FAIL c exit=1 ") == 0);
    CHECK(c.find("failed the health check") != std::string::npos);
    CHECK(c.find("\nbroken\n[pto-par] try 2 of 2: PASS c exit=0 ") != std::string::npos);
    CHECK(c.find("fine\n") != std::string::npos);
}

TEST_CASE("--junit: a try that a sick device failed, then a try that passed, is a <flakyFailure>")
{
    TempDir dir;
    const auto broke = dir.file("broke");
    const auto check = dir.write("check.sh", "[ -e " + broke + " ] && [ \"$(cat " + broke +
                                             ")\" = \"$PTO_PAR_DEVICES\" ] && exit 1\nexit 0\n");
    const auto r = run({pto_par(), "-d", "0-1", "-j", "1", "--device-check", "sh " + check, "--junit", dir.file("j.xml"),
                        dir.write("s.cmds", "@1,label=c if [ ! -e " + broke + " ]; then echo $PTO_PAR_DEVICES > " +
                                            broke + "; echo broken; exit 1; fi; echo fine\n")});
    CHECK(r.exit_code == 0);
    const auto xml = dir.read("j.xml");
    CHECK(xml.find("<flakyFailure") != std::string::npos);
    CHECK(xml.find("<rerunFailure") == std::string::npos);
    CHECK(xml.find("broken") != std::string::npos);
}

TEST_CASE("--log-dir on a full disk: reported, the other reports and jobs unharmed")
{
    TempDir dir;
    const auto r = run({pto_par(), "-d", "none", "-j", "1", "--log-dir", dir.file("logs"),
                        dir.write("f.cmds", "@0,label=big head -c 300000 /dev/zero\n@0,label=small echo hi\n")},
                       {}, {}, 60s, Setup::limit(RLIMIT_FSIZE, 100000));
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("PASS big") != std::string::npos);
    CHECK(r.err.find("PASS small") != std::string::npos);
    CHECK(r.err.find("--log-dir: ") != std::string::npos);
    CHECK(r.err.find("File too large") != std::string::npos);
    CHECK(dir.read("logs/small.log") == "hi\n");
}

TEST_CASE("--dry-run prints the plan with placeholders as written and runs nothing")
{
    TempDir dir;
    const auto marker = dir.file("ran");
    const auto r = run({pto_par(), "-n", "-d", "0-3",
                        dir.write("p.cmds", "@2,label=pair,timeout=600 touch " + marker + " {devices}\n")});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("# pool 0-3 from -d 0-3, platform hw, -j 4, 1 jobs") != std::string::npos);
    CHECK(r.out.find("1\tpair\t2\t600s\t-\t1\ttouch " + marker + " {devices}\n") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(marker));
    const auto bad = run({pto_par(), "-n", "-d", "0", dir.write("q.cmds", "@2 true\n")});
    CHECK(bad.exit_code == 2);
}

TEST_CASE("-d auto: GPU UUIDs become positions and -e hands a job its own UUIDs back")
{
    TempDir dir;
    const auto r = run({pto_par(), "-v", "-e", "CUDA_VISIBLE_DEVICES",
                        dir.write("u.cmds", "@2 echo \"{devices} $CUDA_VISIBLE_DEVICES\"\n")},
                       {}, {"CUDA_VISIBLE_DEVICES=GPU-aaa,GPU-bbb,GPU-ccc"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "0-1 GPU-aaa,GPU-bbb\n");
    CHECK(r.err.find("CUDA_VISIBLE_DEVICES") != std::string::npos);
}

TEST_CASE("-d auto: a variable saying no devices leaves only device-less jobs runnable")
{
    TempDir dir;
    const auto ok = run({pto_par(), dir.write("z.cmds", "@0 echo free\n")}, {}, {"CUDA_VISIBLE_DEVICES=-1"});
    CHECK(ok.exit_code == 0);
    CHECK(ok.out == "free\n");
    const auto refused = run({pto_par(), dir.write("o.cmds", "echo one\n")}, {}, {"ASCEND_RT_VISIBLE_DEVICES="});
    CHECK(refused.exit_code == 2);
    CHECK(refused.err.find("ASCEND_RT_VISIBLE_DEVICES") != std::string::npos);
}

}
