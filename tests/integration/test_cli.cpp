#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>

#include "process.hpp"

using namespace pto::test;

TEST_SUITE("cli") {

TEST_CASE("--help and --version")
{
    const auto h = run({pto_par(), "--help"});
    CHECK(h.exit_code == 0);
    CHECK(h.out.find("Usage: pto-par [OPTION]... [FILE]") != std::string::npos);
    const auto v = run({pto_par(), "-V"});
    CHECK(v.exit_code == 0);
    CHECK(v.out.rfind("pto-par ", 0) == 0);
}

TEST_CASE("bad option values are usage errors naming the value")
{
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"-j", "0"}, "'0' for --jobs"},
        {{"-j", "x"}, "'x' for --jobs"},
        {{"--kill-grace", "-1"}, "'-1' for --kill-grace"},
        {{"--output", "weird"}, "'weird' for --output"},
        {{"-d", "3-1"}, "'3-1'"},
        {{"-d", "a"}, "'a'"},
        {{"-e", "1BAD"}, "'1BAD' for --device-env"},
        {{"--bogus"}, "unknown option '--bogus'"},
        {{"-Z"}, "unknown option '-Z'"},
        {{"-j"}, "'-j' needs a value"},
        {{"a.cmds", "b.cmds"}, "more than one FILE"},
    };
    for (const auto& [args, needle] : cases) {
        std::vector<std::string> argv{pto_par()};
        argv.insert(argv.end(), args.begin(), args.end());
        const auto r = run(argv);
        CHECK_MESSAGE(r.exit_code == 2, needle);
        CHECK_MESSAGE(r.err.find(needle) != std::string::npos, r.err);
    }
}

TEST_CASE("commands come from standard input with no FILE or with -")
{
    for (const char* file : {"", "-"}) {
        std::vector<std::string> argv{pto_par(), "-d", "none"};
        if (*file != '\0')
            argv.emplace_back(file);
        const auto r = run(argv, "@0 echo from-stdin\n");
        CHECK(r.exit_code == 0);
        CHECK(r.out == "from-stdin\n");
    }
}

TEST_CASE("options may follow FILE, as GNU tools take them; after -- a word is a FILE")
{
    TempDir dir;
    const auto cmds = dir.write("t.cmds", "@0 echo ran\n");
    const auto r = run({pto_par(), cmds, "-d", "none", "-j", "1"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "ran\n");
    dir.write("-d", "@0 echo dash-file\n");
    const auto in_dir = run({"/bin/sh", "-c", "cd \"$1\" && exec \"$0\" -d none -- -d", pto_par(), dir.path()});
    CHECK(in_dir.exit_code == 0);
    CHECK(in_dir.out == "dash-file\n");
}

TEST_CASE("an empty commands file runs nothing and succeeds")
{
    TempDir dir;
    const auto r = run({pto_par(), "-d", "none", dir.write("empty.cmds", "")});
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("0 passed, 0 failed") != std::string::npos);
}

TEST_CASE("a missing file and a directory are clear errors")
{
    TempDir dir;
    const auto missing = run({pto_par(), dir.file("nope.cmds")});
    CHECK(missing.exit_code == 2);
    CHECK(missing.err.find("nope.cmds': No such file or directory") != std::string::npos);
    const auto directory = run({pto_par(), dir.path()});
    CHECK(directory.exit_code == 2);
    CHECK(directory.err.find("is a directory") != std::string::npos);
}

TEST_CASE("errors in the commands file are reported compiler-style and nothing starts")
{
    TempDir dir;
    const auto marker = dir.file("ran");
    const auto file = dir.write("bad.cmds", "touch " + marker + "\n@nope=1 true\n");
    const auto r = run({pto_par(), "-d", "0", file});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(file + ":2:") != std::string::npos);
    CHECK(r.err.find(": error: ") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("--launcher slurm without srun on $PATH says so up front, before any job")
{
    TempDir dir;
    // scontrol answers; srun, scancel and squeue are nowhere on $PATH.
    std::filesystem::create_directory(dir.path() + "/bin");
    const std::string scontrol = dir.write("bin/scontrol",
                                           "#!/bin/sh\necho 'JobId=1'\necho '   NodeList=n1'\n"
                                           "echo '     Nodes=n1 CPU_IDs=0-1 Mem=0 GRES=gpu:2(IDX:0-1)'\n");
    REQUIRE(chmod(scontrol.c_str(), 0755) == 0);
    const auto r = run({pto_par(), "--launcher", "slurm", dir.write("x.cmds", "true\n")}, {},
                       {"SLURM_JOB_ID=1", "PATH=" + dir.path() + "/bin"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("srun") != std::string::npos);
    CHECK(r.err.find("$PATH") != std::string::npos);
    CHECK(r.err.find("FAIL") == std::string::npos);
}

TEST_CASE("PTO_PAR_DEVICES that does not parse is an error naming the variable")
{
    TempDir dir;
    const auto r = run({pto_par(), dir.write("x.cmds", "true\n")}, {}, {"PTO_PAR_DEVICES=0-x"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("$PTO_PAR_DEVICES") != std::string::npos);
}

}
