#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "plan/json_value.hpp"
#include "plan/plan.hpp"
#include "report/json_lines.hpp"
#include "scratch_dir.hpp"

using namespace pto::plan;
using pto::cmdfile::JobSpec;

namespace {

std::vector<JobSpec> specs_named(std::initializer_list<const char*> labels)
{
    std::vector<JobSpec> specs;
    for (const char* l : labels) {
        JobSpec s;
        s.seq = specs.size() + 1;
        s.line = s.seq;
        s.label = l;
        s.command = "true";
        specs.push_back(s);
    }
    return specs;
}

History history_of(std::initializer_list<std::pair<const char*, double>> durations)
{
    History h;
    for (const auto& [label, d] : durations)
        h[label] = Past{d, "passed", {}};
    return h;
}

}  // namespace

TEST_SUITE("plan") {

TEST_CASE("JSON values: what pto-par writes reads back, and broken text is an error with its place")
{
    auto v = parse_json(R"( {"label":"a\u00e9\n","n":-1.5e2,"xs":[1,null,true],"o":{}} )");
    REQUIRE(v);
    const auto* o = v->object();
    REQUIRE(o != nullptr);
    CHECK(*o->at("label").string() == "a\xc3\xa9\n");
    CHECK(*o->at("n").number() == -150);
    CHECK(o->at("xs").array()->size() == 3);
    for (const char* bad : {"{", "{\"a\":}", "[1,]", "\"x", "{\"a\":1} 2", "01x", "\"\\q\""}) {
        CAPTURE(bad);
        auto e = parse_json(bad);
        REQUIRE_FALSE(e);
        CHECK(e.error().message.find("at byte") != std::string::npos);
    }
    CHECK_FALSE(parse_json(std::string(100, '[') + std::string(100, ']')));
}

TEST_CASE("JSON strings: any bytes, invalid UTF-8 included, read back exactly as they were written")
{
    for (const std::string& bytes : {std::string("\xff\xfe\xc3"), std::string("a\xc3\xa9\x80z"),
                                    std::string("\xed\xa0\x80"), std::string("\xc3\xa9\xf0\x9f\x98\x80"),
                                    std::string("nul\0tab\t\x7f", 9)}) {
        CAPTURE(bytes);
        const std::string text = pto::report::json_string(bytes);
        auto v = parse_json(text);
        REQUIRE(v);
        REQUIRE(v->string() != nullptr);
        CHECK(*v->string() == bytes);
    }
    // Each byte that is not UTF-8 is the lone surrogate U+DC00+byte, as
    // Python's "surrogateescape" writes it, so a text reader sees no Latin-1.
    CHECK(pto::report::json_string("\xff") == "\"\\udcff\"");
}

TEST_CASE("history: the last report of each label wins; a cancelled run keeps the last duration measured")
{
    History h;
    CHECK(add_report(h,
                       "{\"label\":\"a\",\"status\":\"passed\",\"duration_s\":3.5}\n"
                       "{\"label\":\"b\",\"status\":\"failed\",\"duration_s\":1}\n",
                       "one.json").ignored == 0);
    CHECK(add_report(h,
                       "{\"label\":\"a\",\"status\":\"cancelled\",\"duration_s\":null}\n\n"
                       "{\"label\":\"b\",\"status\":\"passed\",\"duration_s\":2}\n",
                       "two.json").ignored == 0);
    CHECK(h.at("a").status == "cancelled");
    CHECK(h.at("a").duration_s == 3.5);
    CHECK(h.at("b").status == "passed");
    CHECK(h.at("b").duration_s == 2);
    auto cut = add_report(h, "{\"label\":\"c\",\"status\":\"passed\"}\n{\"label\":\"d\",\"sta", "r.json");
    CHECK(cut.cut_off);
    CHECK(cut.ignored == 0);
    CHECK(h.count("c") == 1);
    CHECK(h.count("d") == 0);
    auto whole = add_report(h, "{\"label\":\"e\",\"status\":\"passed\"}", "r.json");
    CHECK_FALSE(whole.cut_off);
    CHECK(h.count("e") == 1);
}

TEST_CASE("history: a record that says nothing usable is ignored and counted, the others kept")
{
    History h;
    const auto read = add_report(h,
                                 "{\"label\":\"a\",\"status\":\"passed\",\"duration_s\":2}\n"
                                 "not json\n"
                                 "{\"x\":1}\n"
                                 "{\"label\":\"b\",\"status\":\"ok\",\"duration_s\":1}\n"
                                 "{\"label\":\"c\",\"status\":\"passed\",\"duration_s\":1e308}\n"
                                 "{\"label\":\"d\",\"status\":\"passed\",\"duration_s\":-5}\n"
                                 "{\"label\":\"e\",\"status\":\"passed\",\"duration_s\":1e999}\n"
                                 "{\"label\":\"f\",\"status\":\"failed\",\"duration_s\":4}\n",
                                 "r.json");
    CHECK_FALSE(read.cut_off);
    CHECK(read.ignored == 6);
    CHECK(read.first_ignored.find("r.json:2: not a JSON object") == 0);
    CHECK(read.used == 2);
    CHECK(h.size() == 2);
    CHECK(h.at("a").duration_s == 2);
    CHECK(h.at("f").duration_s == 4);
    const auto one = add_report(h, "{\"label\":\"b\",\"status\":\"ok\"}\n", "s.json");
    CHECK(one.ignored == 1);
    CHECK(one.first_ignored == "s.json:1: unknown status \"ok\"");
    const auto big = add_report(h, "{\"label\":\"c\",\"status\":\"passed\",\"duration_s\":1e308}\n", "t.json");
    CHECK(big.first_ignored == "t.json:1: \"duration_s\" is not a duration of 0 to 1e9 seconds");
    CHECK(h.count("c") == 0);
}

TEST_CASE("history: a report's device records, and records of any other kind than a job's, are skipped")
{
    History h;
    CHECK(add_report(h,
                       "{\"label\":\"a\",\"status\":\"failed\",\"duration_s\":1}\n"
                       "{\"record\":\"device\",\"device\":1,\"jobs\":1,\"passed\":0,\"failed\":1,"
                       "\"timeout\":0,\"killed\":0,\"sick\":false}\n"
                       "{\"record\":\"device\",\"device\":0,\"node\":\"n1\",\"jobs\":0,\"passed\":0,"
                       "\"failed\":0,\"timeout\":0,\"killed\":0,\"sick\":true}\n",
                       "r.json").ignored == 0);
    CHECK(h.size() == 1);
    CHECK(h.at("a").status == "failed");
    CHECK(add_report(h, "{\"record\":\"job\",\"label\":\"b\",\"status\":\"passed\"}\n", "r.json").ignored == 0);
    CHECK(h.at("b").status == "passed");
    CHECK(add_report(h, "{\"record\":\"node\",\"label\":\"c\",\"status\":\"passed\"}\n", "r.json").ignored == 0);
    CHECK(h.count("c") == 0);
}

TEST_CASE("history files: a missing one is fine, a directory is not")
{
    pto::test::ScratchDir dir("plan");
    const std::vector<std::string> missing{(dir.path() / "none.json").string()};
    std::vector<std::string> notes;
    auto h = read_history(missing, notes);
    REQUIRE(h);
    CHECK(h->empty());
    const std::vector<std::string> a_dir{dir.path().string()};
    CHECK_FALSE(read_history(a_dir, notes));
    CHECK(notes.empty());
}

TEST_CASE("--shard K/N is checked")
{
    auto s = parse_shard("2/4");
    REQUIRE(s);
    CHECK(s->k == 2);
    CHECK(s->n == 4);
    for (const char* bad : {"0/4", "5/4", "2", "2/", "/4", "a/b", "2/4x", "-1/4"}) {
        CAPTURE(bad);
        CHECK_FALSE(parse_shard(bad));
    }
}

TEST_CASE("shards are disjoint, cover the file and do not change from one call to the next")
{
    const auto specs = specs_named({"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"});
    const History none;
    const History some = history_of({{"a", 10}, {"b", 1}, {"c", 7}, {"e", 7}, {"k", 3}, {"j", 0.5}});
    for (const History* h : {&none, &some})
        for (std::size_t n = 1; n <= 5; ++n) {
            std::set<std::size_t> seen;
            for (std::size_t k = 1; k <= n; ++k) {
                const auto mine = shard_jobs(specs, *h, {k, n});
                CHECK(mine == shard_jobs(specs, *h, {k, n}));
                for (std::size_t i : mine)
                    CHECK(seen.insert(i).second);
            }
            CHECK(seen.size() == specs.size());
        }
    CHECK(shard_jobs(specs, none, {2, 3}) == std::vector<std::size_t>{1, 4, 7, 10});
}

TEST_CASE("with history the shards are balanced by expected duration, longest first")
{
    const auto specs = specs_named({"a", "b", "c", "d"});
    const History h = history_of({{"a", 1}, {"b", 1}, {"c", 1}, {"d", 3}});
    // Greedy: d (3) to shard 1, then a, b, c (1 each) to shard 2.
    CHECK(shard_jobs(specs, h, {1, 2}) == std::vector<std::size_t>{3});
    CHECK(shard_jobs(specs, h, {2, 2}) == std::vector<std::size_t>{0, 1, 2});
}

TEST_CASE("--order longest: jobs without history first in file order, then longest first, ties in file order")
{
    const auto specs = specs_named({"a", "b", "c", "d", "e"});
    const History h = history_of({{"a", 2}, {"c", 5}, {"d", 2}});
    const std::vector<std::size_t> all{0, 1, 2, 3, 4};
    CHECK(order_jobs(specs, all, h, Order::longest) == std::vector<std::size_t>{1, 4, 2, 0, 3});
    CHECK(order_jobs(specs, all, h, Order::file) == all);
}

TEST_CASE("--rerun-failed keeps what did not pass and what the report does not know")
{
    const auto specs = specs_named({"a", "b", "c", "d", "e"});
    History last;
    last["a"] = Past{1.0, "passed", {}};
    last["b"] = Past{1.0, "failed", {}};
    last["c"] = Past{1.0, "flaky", {}};
    last["d"] = Past{std::nullopt, "cancelled", {}};
    const std::vector<std::size_t> all{0, 1, 2, 3, 4};
    CHECK(failed_jobs(specs, all, last) == std::vector<std::size_t>{1, 3, 4});
}

TEST_CASE("a record goes with its label while the command is the same, else with the one record of the command")
{
    auto specs = specs_named({"t-3", "t-4", "u"});
    specs[0].command = "new line";
    specs[1].command = "pytest t.py";
    specs[2].command = "pytest u.py";
    History h;
    h["t-3"] = Past{5.0, "passed", "pytest t.py"};  // the label moved to t-4
    h["u"] = Past{2.0, "failed", "pytest u.py"};
    std::vector<std::string> changed;
    const auto matched = match_history(specs, h, &changed);
    CHECK(matched[0] == h.end());
    CHECK(matched[1] == h.find("t-3"));
    CHECK(matched[2] == h.find("u"));
    CHECK(changed == std::vector<std::string>{"t-3"});
    CHECK(expected_durations(specs, h) == std::vector<std::optional<double>>{std::nullopt, 5.0, 2.0});
}

TEST_CASE("a report rewritten in place keeps each named job's last record, in the report's order")
{
    const std::string report = "{\"label\":\"b\",\"status\":\"failed\"}\n"
                               "{\"label\":\"a\",\"status\":\"passed\",\"duration_s\":1}\n"
                               "{\"record\":\"device\",\"device\":0}\n"
                               "not json\n"
                               "{\"label\":\"c\",\"status\":\"passed\"}\n"
                               "{\"label\":\"b\",\"status\":\"passed\"}\n"
                               "{\"label\":\"d\",\"status\":\"pass";
    const std::vector<std::string> labels{"b", "a", "d", "x"};
    CHECK(last_records(report, labels) == "{\"label\":\"a\",\"status\":\"passed\",\"duration_s\":1}\n"
                                          "{\"label\":\"b\",\"status\":\"passed\"}\n");
    CHECK(last_records(report, {}).empty());
}

}
