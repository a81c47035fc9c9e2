// History, order, shards and re-runs, through the real pto-par.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "plan/json_value.hpp"
#include "process.hpp"
#include "reports.hpp"

using namespace pto::test;
using namespace std::chrono_literals;

namespace {

// Labels of the jobs in a --dry-run plan, in order.
std::vector<std::string> planned_labels(const std::string& plan)
{
    std::vector<std::string> labels;
    std::size_t at = 0;
    while (at < plan.size()) {
        const auto nl = plan.find('\n', at);
        const std::string line = plan.substr(at, nl - at);
        at = nl == std::string::npos ? plan.size() : nl + 1;
        if (line.empty() || line[0] == '#')
            continue;
        const auto t1 = line.find('\t');
        labels.push_back(line.substr(t1 + 1, line.find('\t', t1 + 1) - t1 - 1));
    }
    return labels;
}

std::vector<std::string> started_labels(const std::string& err)
{
    std::vector<std::string> labels;
    for (const auto& line : lines_with(err, "] START ")) {
        const auto from = line.find("START ") + 6;
        labels.push_back(line.substr(from, line.find(' ', from) - from));
    }
    return labels;
}

}  // namespace

TEST_SUITE("plan") {

TEST_CASE("a second run with --history and --order longest starts the longest job first")
{
    TempDir dir;
    const auto file = dir.write("s.cmds", "@0,label=short sleep 0.05\n@0,label=long sleep 0.5\n@0,label=mid sleep 0.25\n");
    const auto first = dir.file("first.json");
    REQUIRE(run({pto_par(), "-d", "none", "-j", "3", "--json", first, file}).exit_code == 0);
    const auto second = run({pto_par(), "-d", "none", "-j", "1", "--history", first, "--order", "longest", file});
    CHECK(second.exit_code == 0);
    CHECK(started_labels(second.err) == std::vector<std::string>{"long", "mid", "short"});
    const auto plan = run({pto_par(), "-n", "-d", "none", "--history", first, "--order", "longest",
                           "--history", dir.file("missing.json"), file});
    CHECK(plan.exit_code == 0);
    CHECK(planned_labels(plan.out) == std::vector<std::string>{"long", "mid", "short"});
    CHECK(plan.out.find("\tlong\t0\t-\t0.5") != std::string::npos);
    CHECK(plan.out.find("longest first") != std::string::npos);
}

TEST_CASE("shards 1..N are disjoint and cover the file, with and without history, every time")
{
    TempDir dir;
    std::string cmds;
    for (int i = 0; i < 9; ++i)
        cmds += "@0,label=t" + std::to_string(i) + " true\n";
    const auto file = dir.write("all.cmds", cmds);
    const auto hist = dir.write("h.json", "{\"label\":\"t3\",\"status\":\"passed\",\"duration_s\":9}\n"
                                          "{\"label\":\"t5\",\"status\":\"failed\",\"duration_s\":4}\n");
    for (const bool with_history : {false, true})
        for (int n = 1; n <= 4; ++n) {
            std::set<std::string> seen;
            for (int k = 1; k <= n; ++k) {
                std::vector<std::string> args{pto_par(), "-n", "-d", "none", "--shard",
                                              std::to_string(k) + "/" + std::to_string(n), file};
                if (with_history)
                    args.insert(args.begin() + 1, {"--history", hist});
                const auto a = run(args);
                const auto b = run(args);
                REQUIRE(a.exit_code == 0);
                CHECK(planned_labels(a.out) == planned_labels(b.out));
                for (const auto& l : planned_labels(a.out))
                    CHECK(seen.insert(l).second);
            }
            CHECK(seen.size() == 9);
        }
    const auto json = dir.file("r.json");
    const auto r = run({pto_par(), "-d", "none", "--shard", "2/3", "--json", json, file});
    CHECK(r.exit_code == 0);
    CHECK(lines_with(dir.read("r.json"), "\"label\"").size() == 3);
    CHECK(r.err.find("shard 2/3 (3 of 9 jobs, by position)") != std::string::npos);
    CHECK(r.err.find("3 passed, 0 failed, 0 timed out, 0 killed, 0 cancelled in ") != std::string::npos);
    CHECK(r.err.find("s [shard 2/3]\n") != std::string::npos);
    CHECK(run({pto_par(), "-n", "--shard", "4/3", file}).exit_code == 2);
}

TEST_CASE("--rerun-failed runs exactly what did not pass, and what the report does not know")
{
    TempDir dir;
    const auto json = dir.file("r.json");
    const auto r1 = run({pto_par(), "-d", "none", "--json", json,
                         dir.write("a.cmds", "@0,label=ok true\n@0,label=bad false\n@0,label=ok2 true\n"
                                             "@0,label=bad2 exit 3\n")});
    CHECK(r1.exit_code == 1);
    const auto r2 = run({pto_par(), "-d", "none", "--rerun-failed", json,
                         dir.write("b.cmds", "@0,label=ok true\n@0,label=bad true\n@0,label=ok2 true\n"
                                             "@0,label=bad2 true\n@0,label=new true\n")});
    CHECK(r2.exit_code == 0);
    CHECK(started_labels(r2.err) == std::vector<std::string>{"bad", "bad2", "new"});
    CHECK(r2.err.find("re-running 3 of 5 jobs that did not pass in " + json) != std::string::npos);
}

TEST_CASE("the summary names each job that did not pass, and the command that runs them again works as given")
{
    TempDir dir;
    const auto cmds = dir.write("s t.cmds", "@0,label=ok true\n@0,label=bad false\n@0,label=slow sleep 5\n"
                                            "@0,label=ok2 true\n");
    const auto json = dir.file("it's.json");
    const auto r = run({pto_par(), cmds, "-d", "none", "--job-timeout", "0.5", "--json", json});
    CHECK(r.exit_code == 1);
    const auto at = r.err.find("[pto-par] 2 passed, 1 failed, 1 timed out");
    REQUIRE(at != std::string::npos);
    const auto after = r.err.substr(at);
    CHECK(after.find("\n[pto-par]   FAIL bad (line 2)\n[pto-par]   TIMEOUT slow (line 3)\n") != std::string::npos);
    const std::string lead = "[pto-par] to run what did not pass again: ";
    const auto again = lines_with(after, lead);
    REQUIRE(again.size() == 1);
    const std::string command = again[0].substr(again[0].find(lead) + lead.size());
    CHECK(command.find("--rerun-failed") != std::string::npos);
    const auto second = run({"/bin/sh", "-c", command});
    CHECK(started_labels(second.err) == std::vector<std::string>{"bad", "slow"});
    // Nothing to say when every job passed.
    const auto clean = run({pto_par(), "-d", "none", "--json", json, dir.write("ok.cmds", "@0 true\n")});
    CHECK(clean.err.find("again") == std::string::npos);
    CHECK(clean.err.find("[pto-par]   ") == std::string::npos);
}

TEST_CASE("--rerun-failed R --json R keeps the last record of every job, so the loop converges")
{
    TempDir dir;
    const auto json = dir.file("r.json");
    const auto cmds = dir.write("a.cmds", "@0,label=ok true\n@0,label=bad false\n@0,label=ok2 true\n");
    CHECK(run({pto_par(), "-d", "none", "--json", json, cmds}).exit_code == 1);
    const auto labels_and_statuses = [&] {
        std::vector<std::string> out;
        for (const auto& line : lines_with(dir.read("r.json"), "\"label\""))
            out.push_back(line.substr(10, line.find('"', 10) - 10) + " " +
                          line.substr(line.find("\"status\":\"") + 10,
                                      line.find('"', line.find("\"status\":\"") + 10) -
                                          line.find("\"status\":\"") - 10));
        return out;
    };
    // The same file under another name is the same report.
    const auto again = run({pto_par(), "-d", "none", "--rerun-failed", json, "--json", dir.file("./r.json"), cmds});
    CHECK(again.exit_code == 1);
    CHECK(started_labels(again.err) == std::vector<std::string>{"bad"});
    CHECK(again.err.find("the report keeps the last records of the 2 that passed") != std::string::npos);
    CHECK(labels_and_statuses() == std::vector<std::string>{"ok passed", "ok2 passed", "bad failed"});
    dir.write("a.cmds", "@0,label=ok true\n@0,label=bad true\n@0,label=ok2 true\n");
    CHECK(run({pto_par(), "-d", "none", "--rerun-failed", json, "--json", json, cmds}).exit_code == 0);
    CHECK(labels_and_statuses() == std::vector<std::string>{"ok passed", "ok2 passed", "bad passed"});
    const auto settled = run({pto_par(), "-d", "none", "--rerun-failed", json, "--json", json, cmds});
    CHECK(settled.exit_code == 0);
    CHECK(started_labels(settled.err).empty());
    CHECK(labels_and_statuses().size() == 3);
    // Another file gets only this run's jobs, as before.
    const auto other = dir.file("other.json");
    dir.write("a.cmds", "@0,label=ok true\n@0,label=bad false\n@0,label=ok2 true\n");
    CHECK(run({pto_par(), "-d", "none", "--json", json, cmds}).exit_code == 1);
    CHECK(run({pto_par(), "-d", "none", "--rerun-failed", json, "--json", other, cmds}).exit_code == 1);
    CHECK(lines_with(dir.read("other.json"), "\"label\"").size() == 1);
}

TEST_CASE("--rerun-failed and --history know a label that is not UTF-8 exactly as the file spells it")
{
    TempDir dir;
    const auto json = dir.file("r.json");
    const std::string odd = "\xff\xfe\xc3";
    const auto cmds = dir.write("u.cmds", "@0,label=" + odd + " true\n@0,label=bad false\n@0,label=\xc3\xa9t\xc3\xa9 true\n");
    CHECK(run({pto_par(), "-d", "none", "--json", json, cmds}).exit_code == 1);
    const auto again = run({pto_par(), "-d", "none", "--rerun-failed", json, cmds});
    CHECK(started_labels(again.err) == std::vector<std::string>{"bad"});
    const auto plan = run({pto_par(), "-n", "-d", "none", "--history", json, cmds});
    CHECK(lines_with(plan.out, "\t-\t0.").size() == 3);  // no timeout, a duration from history
}

TEST_CASE("labels that could pass for a line break look the same in --dry-run and in status lines: escaped")
{
    TempDir dir;
    const auto cmds = dir.write("n.cmds", "@0,label=a\xc2\x85z true\n@0,label=b\xe2\x80\xa8z true\n");
    const auto plan = run({pto_par(), "-n", "-d", "none", cmds});
    const auto ran = run({pto_par(), "-d", "none", cmds});
    for (const std::string& text : {plan.out, ran.err}) {
        CHECK(text.find("a\\xc2\\x85z") != std::string::npos);
        CHECK(text.find("b\\xe2\\x80\\xa8z") != std::string::npos);
        CHECK(text.find("\xc2\x85") == std::string::npos);
        CHECK(text.find("\xe2\x80\xa8") == std::string::npos);
    }
}

TEST_CASE("--rerun-failed with a report that is not there is an error, not a re-run of everything")
{
    TempDir dir;
    const auto r = run({pto_par(), "-d", "none", "--rerun-failed", dir.file("none.json"),
                        dir.write("a.cmds", "@0,label=ok true\n")});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("pto-par: error: --rerun-failed: no report '" + dir.file("none.json") + "'") != std::string::npos);
    CHECK(r.err.find("START") == std::string::npos);
}

TEST_CASE("--backfill starts a short job ahead of a blocked head only when history says it fits, never delaying the head")
{
    TempDir dir;
    const auto file = dir.write("b.cmds", "@1,label=a sleep 1\n@2,label=head true\n@1,label=short sleep 0.2\n"
                                          "@1,label=long sleep 2\n@1,label=new sleep 0.1\n");
    const auto hist = dir.write("h.json", "{\"label\":\"a\",\"status\":\"passed\",\"duration_s\":1}\n"
                                          "{\"label\":\"head\",\"status\":\"passed\",\"duration_s\":0.05}\n"
                                          "{\"label\":\"short\",\"status\":\"passed\",\"duration_s\":0.2}\n"
                                          "{\"label\":\"long\",\"status\":\"passed\",\"duration_s\":2}\n");
    const auto with = dir.file("with.json");
    const auto without = dir.file("without.json");
    REQUIRE(run({pto_par(), "-d", "0-1", "--history", hist, "--backfill", "--json", with, file}).exit_code == 0);
    REQUIRE(run({pto_par(), "-d", "0-1", "--history", hist, "--json", without, file}).exit_code == 0);
    auto b = report_starts(dir.read("with.json"));
    auto n = report_starts(dir.read("without.json"));
    // short fits before a ends; long would not, and new has no history.
    CHECK(b["short"] < b["head"]);
    CHECK(b["short"] < 0.5);
    CHECK(b["long"] >= b["head"]);
    CHECK(b["new"] >= b["head"]);
    CHECK(n["short"] >= n["head"]);
    // The head starts no later than without backfill (with room for a busy machine).
    CHECK(b["head"] <= n["head"] + 0.3);
}

TEST_CASE("--backfill: a job that went ahead and overran its history is named with the head's delay")
{
    TempDir dir;
    // History says 'late' takes 0.1 s, so it goes ahead of 'head' while 'a'
    // runs; it takes 1.2 s, and 'head' starts about 0.7 s after 'a' ends.
    const auto file = dir.write("o.cmds", "@1,label=a sleep 0.5\n@2,label=head true\n@1,label=late sleep 1.2\n");
    const auto hist = dir.write("h.json", "{\"label\":\"a\",\"status\":\"passed\",\"duration_s\":0.5}\n"
                                          "{\"label\":\"late\",\"status\":\"passed\",\"duration_s\":0.1}\n");
    const auto r = run({pto_par(), "-d", "0-1", "--history", hist, "--backfill", file});
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("backfilled job 'late' ran past its history and delayed 'head' by ") != std::string::npos);
}

TEST_CASE("--backfill: jobs that ended long before the head could start are not blamed for its wait")
{
    TempDir dir;
    // long1 holds 2 of 4 devices for 2 s; head needs all 4; short1 and short2
    // go ahead on the other two and end after about 0.5 s, a little past
    // their history, 1.5 s before head can start.
    const auto file = dir.write("i.cmds", "@2,label=long1 sleep 2\n@4,label=head sleep 0.5\n"
                                          "@1,label=short1 sleep 0.55\n@1,label=short2 sleep 0.55\n");
    const auto hist = dir.write("h.json", "{\"label\":\"long1\",\"status\":\"passed\",\"duration_s\":2}\n"
                                          "{\"label\":\"head\",\"status\":\"passed\",\"duration_s\":0.5}\n"
                                          "{\"label\":\"short1\",\"status\":\"passed\",\"duration_s\":0.5}\n"
                                          "{\"label\":\"short2\",\"status\":\"passed\",\"duration_s\":0.5}\n");
    const auto json = dir.file("r.json");
    const auto r = run({pto_par(), "-d", "0-3", "--history", hist, "--backfill", "--json", json, file});
    CHECK(r.exit_code == 0);
    auto s = report_starts(dir.read("r.json"));
    REQUIRE(s["short1"] < s["head"]);  // they did go ahead
    CHECK(r.err.find("ran past its history") == std::string::npos);
}

TEST_CASE("--backfill without history lets nothing pass the head")
{
    TempDir dir;
    const auto file = dir.write("n.cmds", "@1,label=a sleep 0.5\n@2,label=head true\n@1,label=short true\n");
    const auto json = dir.file("r.json");
    REQUIRE(run({pto_par(), "-d", "0-1", "--backfill", "--json", json, file}).exit_code == 0);
    auto s = report_starts(dir.read("r.json"));
    CHECK(s["short"] >= s["head"]);
}

TEST_CASE("a history file that is not a report is an error naming its line")
{
    TempDir dir;
    const auto file = dir.write("c.cmds", "@0 true\n");
    const auto r = run({pto_par(), "-d", "none", "--history", file, file});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(file + ":1: not a JSON object") != std::string::npos);
}

}
