// Port blocks: jobs that open rendezvous ports never collide.
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "process.hpp"

using namespace pto::test;
using namespace std::chrono_literals;

TEST_SUITE("ports") {

TEST_CASE("ten concurrent ports=4 jobs get disjoint blocks that each can bind, in {port} and the environment")
{
    TempDir dir;
    std::string cmds;
    // Each job binds its four ports for half a second, all jobs at once: a
    // port handed to two jobs would make one bind fail.
    // The distribution's python: a version manager's shim on PATH (pyenv)
    // depends on the environment in ways a test should not.
    const std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
    const std::string py =
        python + " -c 'import os,socket,sys,time; "
        "lo,hi=map(int,os.environ[\"PTO_PAR_PORTS\"].split(\"-\")); "
        "assert hi-lo==3 and os.environ[\"MASTER_PORT\"]==os.environ[\"PTO_PAR_PORT\"]==str(lo)==sys.argv[1]; "
        "ss=[socket.socket() for p in range(lo,hi+1)]; "
        "[s.bind((\"0.0.0.0\",p)) for s,p in zip(ss,range(lo,hi+1))]; "
        "print(\"held\",lo,hi,flush=True); time.sleep(0.5)' {port}";
    for (int i = 0; i < 10; ++i)
        cmds += "@0,ports=4,label=p" + std::to_string(i) + " " + py + "\n";
    const auto r = run({pto_par(), "-d", "none", "-j", "10", "--ports", "31000-31099", dir.write("p.cmds", cmds)});
    INFO("stderr: " << r.err);
    INFO("stdout: " << r.out.substr(0, 4000));
    CHECK(r.exit_code == 0);
    CHECK(lines_with(r.err, "] PASS ").size() == 10);
    std::vector<std::pair<int, int>> blocks;
    for (const auto& line : lines_with(r.out, "held ")) {
        std::istringstream in(line.substr(line.find("held ") + 5));
        int lo = 0;
        int hi = 0;
        in >> lo >> hi;
        blocks.emplace_back(lo, hi);
    }
    REQUIRE(blocks.size() == 10);
    for (std::size_t a = 0; a < blocks.size(); ++a)
        for (std::size_t b = a + 1; b < blocks.size(); ++b)
            CHECK((blocks[a].second < blocks[b].first || blocks[b].second < blocks[a].first));
    for (const auto& [lo, hi] : blocks)
        CHECK((lo >= 31000 && hi <= 31099));
}

TEST_CASE("a job needing more ports than the range has is a static error; so is a bad --ports")
{
    TempDir dir;
    const auto r = run({pto_par(), "-d", "none", "--ports", "31000-31003", dir.write("p.cmds", "@0,ports=5 true\n")});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("p.cmds:1:1: error: job 'true' needs 5 ports but --ports 31000-31003 has 4") != std::string::npos);
    const auto bad = run({pto_par(), "-d", "none", "--ports", "3-1", dir.file("p.cmds")});
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find("--ports: expected LO-HI") != std::string::npos);
    const auto key = run({pto_par(), "-n", "-d", "none", dir.write("k.cmds", "@0,ports=-1 true\n")});
    CHECK(key.exit_code == 2);
    CHECK(key.err.find("invalid port count '-1'") != std::string::npos);
}

TEST_CASE("ports taken by another program are skipped; a run that cannot be found is an error, not a wait")
{
    TempDir dir;
    // Something that is not pto-par's holds 31201 for the whole run.
    const int held = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(held >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(31201);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    REQUIRE(bind(held, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0);
    const auto r = run({pto_par(), "-d", "none", "-j", "1", "--ports", "31200-31203",
                        dir.write("busy.cmds", "@0,label=two,ports=2 echo two $PTO_PAR_PORTS\n"
                                               "@0,label=three,ports=3 echo three $PTO_PAR_PORTS\n")});
    close(held);
    CHECK(r.out.find("two 31202-31203") != std::string::npos);
    CHECK(r.err.find("FAIL three") != std::string::npos);
    CHECK(r.err.find("no 3 consecutive free TCP ports in 31200-31203") != std::string::npos);
}

}
