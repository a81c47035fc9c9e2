// --output stream against the rule as SPEC section 5 states it, fed in
// chunks of every size: complete lines prefixed `[label] `, a line without
// end cut into lines of stream_line_limit bytes once a chunk leaves it that
// long, the last partial line ended with a newline when its job ends.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "output/sink.hpp"
#include "report/output_writer.hpp"

using pto::report::OutputMode;
using pto::report::OutputWriter;
using pto::report::stream_line_limit;

namespace {

// The rule, byte by byte: what stdout must carry.
class Model {
public:
    void chunk(const std::string& label, std::string_view bytes)
    {
        std::string& pending = partial_[label];
        for (const char c : bytes) {
            pending += c;
            if (c == '\n') {
                out += "[" + label + "] " + pending;
                pending.clear();
            }
        }
        while (pending.size() >= stream_line_limit) {
            out += "[" + label + "] " + pending.substr(0, stream_line_limit) + "\n";
            pending.erase(0, stream_line_limit);
        }
    }
    void finish(const std::string& label)
    {
        if (!partial_[label].empty())
            out += "[" + label + "] " + partial_[label] + "\n";
        partial_.erase(label);
    }
    std::string out;

private:
    std::map<std::string, std::string> partial_;
};

// Standard output as a regular file, read back at the end.
struct Stdout {
    int fd = -1;
    std::unique_ptr<pto::output::Sink> sink;
    Stdout()
    {
        std::string name = (std::filesystem::temp_directory_path() / "pto-par-output-writer.XXXXXX").string();
        fd = mkstemp(name.data());
        REQUIRE(fd >= 0);
        unlink(name.c_str());
        auto s = pto::output::Sink::open(fd, "standard output", pto::SpillPlace{{}, true});
        REQUIRE(s);
        sink = std::move(*s);
    }
    ~Stdout() { close(fd); }
    std::string text() const
    {
        std::string all;
        char buf[65536];
        for (off_t at = 0;;) {
            const ssize_t n = pread(fd, buf, sizeof buf, at);
            REQUIRE(n >= 0);
            if (n == 0)
                return all;
            all.append(buf, static_cast<std::size_t>(n));
            at += n;
        }
    }
};

struct Jobs {
    std::vector<pto::Job> job;
    std::vector<pto::JobResult> result;
    explicit Jobs(const std::vector<std::string>& labels)
    {
        for (std::size_t i = 0; i < labels.size(); ++i) {
            pto::Job j;
            j.label = labels[i];
            job.push_back(j);
            pto::JobResult r;
            r.index = i;
            r.label = labels[i];
            r.status = pto::JobStatus::passed;
            result.push_back(r);
        }
    }
};

}  // namespace

TEST_SUITE("output_writer") {

TEST_CASE("--output stream: what each job printed, chunked any way, comes out prefixed line by line")
{
    // Short and long lines, empty lines, NUL bytes, lines longer than the
    // limit in one chunk, a line without end that crosses many chunks.
    const std::vector<std::string> texts = {
        "one\ntwo\n\nthree without end",
        std::string(3, '\n') + std::string("a\0b\n", 4) + std::string(stream_line_limit * 2 + 5, 'x') + "\nend\n",
        std::string(stream_line_limit * 3 + 17, 'y'),
        "short\n" + std::string(stream_line_limit - 1, 'z') + "\n" + std::string(stream_line_limit, 'w'),
        "x\ny\n\n",
    };
    // Prefixes of 4, 10, 37, 7 and 16 bytes: the last fills a block exactly.
    const std::vector<std::string> labels = {"a", "job two", "a-much-longer-label/with:odd chars", "last",
                                             "thirteen-char"};
    for (unsigned seed = 1; seed <= 20; ++seed) {
        CAPTURE(seed);
        std::mt19937 rng(seed);
        Stdout out;
        OutputWriter writer(*out.sink, OutputMode::stream);
        Model model;
        Jobs jobs(labels);
        std::vector<std::size_t> at(texts.size(), 0);
        // Jobs take turns at random, each with a chunk of random size.
        for (std::size_t left = texts.size(); left > 0;) {
            const std::size_t i = rng() % texts.size();
            if (at[i] > texts[i].size())
                continue;
            if (at[i] == texts[i].size()) {
                writer.on_finish(jobs.job[i], jobs.result[i], pto::JobOutput{});
                model.finish(labels[i]);
                ++at[i];
                --left;
                continue;
            }
            const std::size_t sizes[] = {1, 2, 5, 64, 1000, stream_line_limit - 1, stream_line_limit + 3, 200000};
            const std::size_t n = std::min(texts[i].size() - at[i], sizes[rng() % std::size(sizes)]);
            const std::string_view chunk = std::string_view(texts[i]).substr(at[i], n);
            writer.on_output(jobs.job[i], jobs.result[i], chunk);
            model.chunk(labels[i], chunk);
            at[i] += n;
        }
        CHECK(out.sink->pending() == 0);
        CHECK(out.text() == model.out);
    }
}

TEST_CASE("--output stream: a chunk of empty lines under a long label comes out whole")
{
    // Each byte becomes a line of its own: many times the chunk's size.
    const std::string label(60, 'L');
    const std::string chunk(100000, '\n');
    Stdout out;
    OutputWriter writer(*out.sink, OutputMode::stream);
    Jobs jobs({label});
    writer.on_output(jobs.job[0], jobs.result[0], chunk);
    writer.on_output(jobs.job[0], jobs.result[0], "tail");
    writer.on_finish(jobs.job[0], jobs.result[0], pto::JobOutput{});
    Model model;
    model.chunk(label, chunk);
    model.chunk(label, "tail");
    model.finish(label);
    CHECK(out.text() == model.out);
}

TEST_CASE("--tag: a block of group and failed mode is prefixed line by line, as stream prints it")
{
    const std::string text = std::string("one\n\ntwo\0x\n", 11) + std::string(stream_line_limit + 3, 'y');
    for (const auto mode : {OutputMode::group, OutputMode::failed}) {
        Stdout out;
        OutputWriter writer(*out.sink, mode, pto::report::CiKind::none, {}, true);
        Jobs jobs({"ok", "bad"});
        jobs.result[1].status = pto::JobStatus::failed;
        for (std::size_t i = 0; i < 2; ++i) {
            pto::JobOutput output;
            output.append(text);
            writer.on_finish(jobs.job[i], jobs.result[i], output);
        }
        Model model;
        if (mode == OutputMode::group) {
            model.chunk("ok", text);
            model.finish("ok");
        }
        model.chunk("bad", text);
        model.finish("bad");
        CHECK(out.text() == model.out);
    }
}

TEST_CASE("group mode's live block: the lone job's bytes as they come, a block beside it held until it ends")
{
    Stdout out;
    OutputWriter writer(*out.sink, OutputMode::group);
    Jobs jobs({"a", "b", "c"});
    pto::JobOutput a, b, c;
    const auto print = [&](std::size_t i, pto::JobOutput& kept, std::string_view bytes) {
        kept.append(bytes);
        if (writer.live_for(i))
            writer.on_output_live(jobs.job[i], jobs.result[i], bytes, kept);
    };
    writer.on_start(jobs.job[0], jobs.result[0]);
    CHECK(writer.live_for(0));
    print(0, a, "a1\n");
    CHECK(out.text() == "a1\n");
    writer.on_start(jobs.job[1], jobs.result[1]);
    writer.on_start(jobs.job[2], jobs.result[2]);
    CHECK_FALSE(writer.live_for(1));
    print(1, b, "b\n");
    print(2, c, "c1\n");
    writer.on_finish(jobs.job[1], jobs.result[1], b);
    CHECK(out.text() == "a1\n");  // b's block waits for a's to end
    print(0, a, "a2\n");
    CHECK(out.text() == "a1\na2\n");
    writer.on_finish(jobs.job[0], jobs.result[0], a);
    // Then b's block; c, left alone, is live, and the run shows it what it
    // kept so far (no new bytes) at once.
    CHECK(out.text() == "a1\na2\nb\n");
    CHECK(writer.live_for(2));
    print(2, c, "");
    CHECK(out.text() == "a1\na2\nb\nc1\n");
    print(2, c, "c2\n");
    CHECK(out.text() == "a1\na2\nb\nc1\nc2\n");
    writer.on_finish(jobs.job[2], jobs.result[2], c);
    CHECK(out.text() == "a1\na2\nb\nc1\nc2\n");
}

}
