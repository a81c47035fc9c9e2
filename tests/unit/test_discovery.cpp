#include <doctest/doctest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "devices/discovery.hpp"

using pto::DiscoveredPool;
using pto::discover_devices;

namespace {

using Env = std::map<std::string, std::string>;

// A /dev root that does not exist: discovery from variables alone.
const std::string no_dev = "/nonexistent-pto-par-test-dev";

pto::GetenvFn env_of(const Env& env)
{
    return [&env](const char* name) -> const char* {
        const auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    };
}

DiscoveredPool ok(const Env& env, const std::string& dev_root = no_dev)
{
    auto r = discover_devices(env_of(env), dev_root);
    REQUIRE_MESSAGE(r.has_value(), r.error().message);
    return *r;
}

std::string err(const Env& env, const std::string& dev_root = no_dev)
{
    auto r = discover_devices(env_of(env), dev_root);
    REQUIRE(!r.has_value());
    return r.error().message;
}

// A fake /dev with these (plain, empty) files in it, removed afterwards.
class FakeDev {
public:
    explicit FakeDev(std::initializer_list<const char*> names)
    {
        std::string tmpl = (std::filesystem::temp_directory_path() / "pto-par-dev-XXXXXX").string();
        REQUIRE(mkdtemp(tmpl.data()) != nullptr);
        root_ = tmpl;
        for (const char* n : names) {
            const int fd = open((root_ + "/" + n).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
            REQUIRE(fd >= 0);
            close(fd);
        }
    }
    ~FakeDev()
    {
        std::error_code ec;
        std::filesystem::remove_all(root_, ec);
    }
    const std::string& root() const { return root_; }

private:
    std::string root_;
};

}  // namespace

TEST_SUITE("discovery") {

TEST_CASE("each variable on its own gives its ids and says where they came from")
{
    for (const char* var : {"PTO_PAR_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS",
                            "SLURM_JOB_GPUS"}) {
        CAPTURE(var);
        const Env env{{var, "4,6"}};
        const auto p = ok(env);
        CHECK(p.ids == std::vector<int>{4, 6});
        CHECK(p.source == std::string("$") + var);
        CHECK(p.variable == var);
        CHECK(p.entries.empty());
    }
}

TEST_CASE("ranges work as on the command line")
{
    CHECK(ok({{"PTO_PAR_DEVICES", "0-3"}}).ids == std::vector<int>{0, 1, 2, 3});
    CHECK(ok({{"CUDA_VISIBLE_DEVICES", " 2 , 0 "}}).ids == std::vector<int>{0, 2});
}

TEST_CASE("the first variable set wins, in SPEC order")
{
    Env env{{"PTO_PAR_DEVICES", "1"},
            {"ASCEND_RT_VISIBLE_DEVICES", "2"},
            {"CUDA_VISIBLE_DEVICES", "3"},
            {"SLURM_STEP_GPUS", "4"},
            {"SLURM_JOB_GPUS", "5"}};
    const std::vector<std::pair<const char*, int>> order = {{"PTO_PAR_DEVICES", 1},
                                                            {"ASCEND_RT_VISIBLE_DEVICES", 2},
                                                            {"CUDA_VISIBLE_DEVICES", 3},
                                                            {"SLURM_STEP_GPUS", 4},
                                                            {"SLURM_JOB_GPUS", 5}};
    for (const auto& [var, id] : order) {
        CAPTURE(var);
        const auto p = ok(env);
        CHECK(p.variable == var);
        CHECK(p.ids == std::vector<int>{id});
        env.erase(var);
    }
}

TEST_CASE("a variable wins over /dev entries")
{
    const FakeDev dev{"davinci0", "davinci1", "nvidia0"};
    const auto p = ok({{"SLURM_JOB_GPUS", "7"}}, dev.root());
    CHECK(p.ids == std::vector<int>{7});
}

TEST_CASE("empty, -1 and NoDevFiles mean no devices and stop the search")
{
    const FakeDev dev{"davinci0", "nvidia0"};
    for (const char* value : {"", "  ", ",", "-1", " -1 ", "NoDevFiles"}) {
        CAPTURE(value);
        // A later variable and /dev entries are there, but the first one decides.
        const auto p = ok({{"CUDA_VISIBLE_DEVICES", value}, {"SLURM_JOB_GPUS", "0,1"}}, dev.root());
        CHECK(p.ids.empty());
        CHECK(p.variable == "CUDA_VISIBLE_DEVICES");
        CHECK(p.source.find("$CUDA_VISIBLE_DEVICES") == 0);
        CHECK(p.source.find("no devices") != std::string::npos);
    }
    CHECK(ok({{"PTO_PAR_DEVICES", ""}, {"CUDA_VISIBLE_DEVICES", "0"}}).source == "$PTO_PAR_DEVICES is empty: no devices");
    CHECK(ok({{"CUDA_VISIBLE_DEVICES", "-1"}}).source == "$CUDA_VISIBLE_DEVICES is '-1': no devices");
}

TEST_CASE("GPU UUIDs become positions, and value_for hands the UUIDs back")
{
    const Env env{{"CUDA_VISIBLE_DEVICES", "GPU-8f2a1c3e-aaaa-bbbb-cccc-0123456789ab,GPU-11112222-3333-4444-5555-666677778888"}};
    const auto p = ok(env);
    CHECK(p.ids == std::vector<int>{0, 1});
    CHECK(p.source == "$CUDA_VISIBLE_DEVICES (GPU UUIDs, as positions 0-1)");
    CHECK(p.variable == "CUDA_VISIBLE_DEVICES");
    REQUIRE(p.entries.size() == 2);
    CHECK(p.entries[0] == "GPU-8f2a1c3e-aaaa-bbbb-cccc-0123456789ab");

    const std::vector<int> second{1};
    const std::vector<int> both{0, 1};
    CHECK(p.value_for("CUDA_VISIBLE_DEVICES", second) == "GPU-11112222-3333-4444-5555-666677778888");
    CHECK(p.value_for("CUDA_VISIBLE_DEVICES", both) ==
          "GPU-8f2a1c3e-aaaa-bbbb-cccc-0123456789ab,GPU-11112222-3333-4444-5555-666677778888");
    // Any other variable gets the positions.
    CHECK(p.value_for("ASCEND_RT_VISIBLE_DEVICES", both) == "0,1");
    CHECK(p.value_for("MY_DEVICES", second) == "1");
    const std::vector<int> none;
    CHECK(p.value_for("CUDA_VISIBLE_DEVICES", none).empty());
}

TEST_CASE("MIG ids, one entry")
{
    const auto p = ok({{"CUDA_VISIBLE_DEVICES", "MIG-GPU-8f2a1c3e/1/0"}});
    CHECK(p.ids == std::vector<int>{0});
    CHECK(p.source == "$CUDA_VISIBLE_DEVICES (MIG ids, as position 0)");
    const std::vector<int> zero{0};
    CHECK(p.value_for("CUDA_VISIBLE_DEVICES", zero) == "MIG-GPU-8f2a1c3e/1/0");
}

TEST_CASE("value_for with a numeric pool is the comma-separated ids, whatever the variable")
{
    const auto p = ok({{"CUDA_VISIBLE_DEVICES", "0-3"}});
    const std::vector<int> ids{1, 2, 3};
    CHECK(p.value_for("CUDA_VISIBLE_DEVICES", ids) == "1,2,3");
    CHECK(p.value_for("OTHER", ids) == "1,2,3");
}

TEST_CASE("Slurm variables")
{
    const auto step = ok({{"SLURM_STEP_GPUS", "2,3"}, {"SLURM_JOB_GPUS", "0,1,2,3"}});
    CHECK(step.ids == std::vector<int>{2, 3});
    CHECK(step.source == "$SLURM_STEP_GPUS");
    const auto job = ok({{"SLURM_JOB_GPUS", "0,1,2,3"}});
    CHECK(job.ids == std::vector<int>{0, 1, 2, 3});
    CHECK(job.source == "$SLURM_JOB_GPUS");
}

TEST_CASE("/dev/davinciN entries, other davinci names ignored")
{
    const FakeDev dev{"davinci0", "davinci3", "davinci_manager", "davinci_manager_docker", "nvidia0", "null"};
    const auto p = ok({}, dev.root());
    CHECK(p.ids == std::vector<int>{0, 3});
    CHECK(p.source == dev.root() + "/davinci*");
    CHECK(p.variable.empty());
    CHECK(p.entries.empty());
    const std::vector<int> ids{3};
    // The runtime numbers the devices it is shown from 0: in a container
    // given davinci0 and davinci3, the second is its device 1.
    CHECK(p.narrowed == "ASCEND_RT_VISIBLE_DEVICES");
    CHECK(p.value_for("ASCEND_RT_VISIBLE_DEVICES", ids) == "1");
    CHECK(p.value_for("OTHER", ids) == "3");
}

TEST_CASE("/dev/nvidiaN entries, control nodes ignored")
{
    const FakeDev dev{"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia"};
    const auto p = ok({}, dev.root());
    CHECK(p.ids == std::vector<int>{0, 1});
    CHECK(p.source == dev.root() + "/nvidia*");
    CHECK(p.narrowed == "CUDA_VISIBLE_DEVICES");
    CHECK(p.also_set == std::vector<std::string>{"CUDA_DEVICE_ORDER=PCI_BUS_ID"});
}

TEST_CASE("/dev/nvidiaN in a container shown two of them: CUDA numbers them 0 and 1")
{
    const FakeDev dev{"nvidia2", "nvidia3", "nvidiactl"};
    const auto p = ok({}, dev.root());
    CHECK(p.ids == std::vector<int>{2, 3});
    const std::vector<int> last{3};
    const std::vector<int> both{2, 3};
    CHECK(p.value_for("CUDA_VISIBLE_DEVICES", last) == "1");
    CHECK(p.value_for("CUDA_VISIBLE_DEVICES", both) == "0,1");
    // The device order the user chose is left alone.
    const auto q = ok({{"CUDA_DEVICE_ORDER", "FASTEST_FIRST"}}, dev.root());
    CHECK(q.also_set.empty());
}

TEST_CASE("the variable the pool came from is the one narrowed in each job")
{
    CHECK(ok({{"CUDA_VISIBLE_DEVICES", "4,5"}}).narrowed == "CUDA_VISIBLE_DEVICES");
    CHECK(ok({{"ASCEND_RT_VISIBLE_DEVICES", "1"}}).narrowed == "ASCEND_RT_VISIBLE_DEVICES");
    CHECK(ok({{"SLURM_JOB_GPUS", "0,1"}}).narrowed == "SLURM_JOB_GPUS");
    CHECK(ok({{"CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b"}}).narrowed == "CUDA_VISIBLE_DEVICES");
    // Every job gets $PTO_PAR_DEVICES anyway; nothing found, nothing to narrow.
    CHECK(ok({{"PTO_PAR_DEVICES", "0-3"}}).narrowed.empty());
    CHECK(ok({}).narrowed.empty());
}

TEST_CASE("inside a job of a numbered pool: the variable the outer run narrowed, as it narrowed it")
{
    // The outer run's pool came from /dev/nvidia2 and /dev/nvidia3; its
    // job holds both, as CUDA's 0 and 1.
    const auto p = ok({{"PTO_PAR_DEVICES", "2,3"}, {"PTO_PAR_DEVICE_NAMES", ""},
                       {"PTO_PAR_DEVICE_VARIABLE", "CUDA_VISIBLE_DEVICES"}, {"CUDA_VISIBLE_DEVICES", "0,1"}});
    CHECK(p.ids == std::vector<int>{2, 3});
    CHECK(p.narrowed == "CUDA_VISIBLE_DEVICES");
    const std::vector<int> last{3};
    CHECK(p.value_for("CUDA_VISIBLE_DEVICES", last) == "1");
    // Not as many entries as devices: not narrowed, never a guess.
    const auto q = ok({{"PTO_PAR_DEVICES", "2,3"}, {"PTO_PAR_DEVICE_NAMES", ""},
                       {"PTO_PAR_DEVICE_VARIABLE", "CUDA_VISIBLE_DEVICES"}, {"CUDA_VISIBLE_DEVICES", "0"}});
    CHECK(q.narrowed.empty());
}

TEST_CASE("nothing found: an empty pool")
{
    const FakeDev dev{"null", "davinci_manager", "nvidiactl", "davinci", "davinci1x"};
    auto p = ok({}, dev.root());
    CHECK(p.ids.empty());
    CHECK(p.source == "nothing found: no devices");
    // A missing /dev root is not an error either.
    p = ok({});
    CHECK(p.ids.empty());
    CHECK(p.source == "nothing found: no devices");
}

TEST_CASE("bad values are errors naming the variable and the part")
{
    auto m = err({{"CUDA_VISIBLE_DEVICES", "0,x1"}});
    CHECK(m.find("$CUDA_VISIBLE_DEVICES") == 0);
    CHECK(m.find("'0'") != std::string::npos);  // mixes numbers and names
    CHECK(m.find("'x1'") != std::string::npos);

    m = err({{"ASCEND_RT_VISIBLE_DEVICES", "0,3-1"}});
    CHECK(m.find("$ASCEND_RT_VISIBLE_DEVICES") == 0);
    CHECK(m.find("'3-1'") != std::string::npos);

    m = err({{"PTO_PAR_DEVICES", "0,1q"}});
    CHECK(m.find("$PTO_PAR_DEVICES") == 0);
    CHECK(m.find("'1q'") != std::string::npos);

    m = err({{"SLURM_JOB_GPUS", "0,-2"}});
    CHECK(m.find("$SLURM_JOB_GPUS") == 0);
    CHECK(m.find("'-2'") != std::string::npos);

    m = err({{"CUDA_VISIBLE_DEVICES", "GPU-a,GPU-a"}});
    CHECK(m.find("$CUDA_VISIBLE_DEVICES") == 0);
    CHECK(m.find("'GPU-a'") != std::string::npos);
    CHECK(m.find("twice") != std::string::npos);

    // Bytes from the environment are quoted printably.
    m = err({{"CUDA_VISIBLE_DEVICES", "GPU-a\x1b[31m"}});
    CHECK(m.find("$CUDA_VISIBLE_DEVICES") == 0);
    CHECK(m.find("\\x1b") != std::string::npos);
    CHECK(m.find('\x1b') == std::string::npos);

    // Neither a number nor a name is called neither.
    for (const char* value : {"GPU-a,../../etc", "../../etc", "0,../../etc"}) {
        m = err({{"CUDA_VISIBLE_DEVICES", value}});
        CHECK_MESSAGE(m.find("neither a device number nor a device name: '../../etc'") != std::string::npos, m);
        CHECK(m.find("device numbers ('../../etc')") == std::string::npos);
    }

    // A bad value stops the search: it is not skipped in favour of the next.
    CHECK(!discover_devices(env_of({{"CUDA_VISIBLE_DEVICES", "zz z"}, {"SLURM_JOB_GPUS", "0"}}), no_dev));
}

TEST_CASE("the /dev root may end with a slash")
{
    const FakeDev dev{"davinci2"};
    const auto p = ok({}, dev.root() + "/");
    CHECK(p.ids == std::vector<int>{2});
    CHECK(p.source == dev.root() + "/davinci*");
}

TEST_CASE("inside a job of a pool of UUIDs: the job's own UUIDs, handed back in their variable")
{
    const auto p = ok({{"PTO_PAR_DEVICES", "1,2"},
                       {"PTO_PAR_DEVICE_NAMES", "GPU-bbb,GPU-ccc"},
                       {"PTO_PAR_DEVICE_VARIABLE", "CUDA_VISIBLE_DEVICES"},
                       {"CUDA_VISIBLE_DEVICES", "GPU-aaa,GPU-bbb,GPU-ccc"}});
    CHECK(p.ids == std::vector<int>{0, 1});
    CHECK(p.variable == "CUDA_VISIBLE_DEVICES");
    CHECK(p.entries == std::vector<std::string>{"GPU-bbb", "GPU-ccc"});
    CHECK(p.source == "$PTO_PAR_DEVICE_NAMES (GPU UUIDs of the outer run's $CUDA_VISIBLE_DEVICES, as positions 0-1)");
    const std::vector<int> second{1};
    CHECK(p.value_for("CUDA_VISIBLE_DEVICES", second) == "GPU-ccc");
    CHECK(p.value_for("ASCEND_RT_VISIBLE_DEVICES", second) == "1");
}

TEST_CASE("empty device names (a numbered outer pool) leave $PTO_PAR_DEVICES alone")
{
    const auto p = ok({{"PTO_PAR_DEVICES", "3,5"}, {"PTO_PAR_DEVICE_NAMES", ""}, {"PTO_PAR_DEVICE_VARIABLE", ""}});
    CHECK(p.ids == std::vector<int>{3, 5});
    CHECK(p.entries.empty());
    CHECK(p.source == "$PTO_PAR_DEVICES");
    // Without $PTO_PAR_DEVICES the names are not looked at: it comes first.
    const auto q = ok({{"PTO_PAR_DEVICE_NAMES", "GPU-x"}, {"PTO_PAR_DEVICE_VARIABLE", "CUDA_VISIBLE_DEVICES"},
                       {"CUDA_VISIBLE_DEVICES", "0"}});
    CHECK(q.source == "$CUDA_VISIBLE_DEVICES");
}

TEST_CASE("device names that disagree with $PTO_PAR_DEVICES are an error, never a guess")
{
    CHECK(err({{"PTO_PAR_DEVICES", "0"}, {"PTO_PAR_DEVICE_NAMES", "GPU-a,GPU-b"},
               {"PTO_PAR_DEVICE_VARIABLE", "CUDA_VISIBLE_DEVICES"}})
              .find("$PTO_PAR_DEVICES has 1 devices but $PTO_PAR_DEVICE_NAMES names 2") != std::string::npos);
    CHECK(err({{"PTO_PAR_DEVICES", "0"}, {"PTO_PAR_DEVICE_NAMES", "GPU-a"}})
              .find("$PTO_PAR_DEVICE_VARIABLE does not name") != std::string::npos);
    CHECK(err({{"PTO_PAR_DEVICES", "0"}, {"PTO_PAR_DEVICE_NAMES", "GPU-a"}, {"PTO_PAR_DEVICE_VARIABLE", "1X"}})
              .find("$PTO_PAR_DEVICE_VARIABLE does not name") != std::string::npos);
    CHECK(err({{"PTO_PAR_DEVICES", "0"}, {"PTO_PAR_DEVICE_NAMES", "4"}, {"PTO_PAR_DEVICE_VARIABLE", "CUDA_VISIBLE_DEVICES"}})
              .find("expected device names") != std::string::npos);
}

}  // TEST_SUITE
