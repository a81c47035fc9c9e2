#include <doctest/doctest.h>

#include "placement/local_devices.hpp"
#include "placement/placement.hpp"
#include "placement/slurm_nodes.hpp"
#include "scratch_dir.hpp"

#include <unistd.h>

using pto::placement::Grant;
using pto::leases::LockDir;
using pto::placement::Leasing;
using pto::placement::LocalDevices;
using pto::placement::Placement;
using pto::placement::Shortage;
using pto::placement::SlurmNodes;
using V = std::vector<int>;

namespace {

Placement local(V ids)
{
    // An empty port range: no test here binds a port.
    return Placement(std::make_unique<LocalDevices>(std::move(ids)), 1, 0);
}

// Two runs' lock directories in one place: an flock is per open file, so
// two of them in one process shut each other out as two runs would.
struct TwoRuns {
    pto::test::ScratchDir scratch{"placement-leases"};
    LockDir ours = open();
    LockDir other = open();

    LockDir open()
    {
        auto d = LockDir::open(scratch.path().string());
        REQUIRE(d);
        return std::move(*d);
    }
    Leasing leasing(std::function<std::string(int)> identity = {}) { return {&ours, std::move(identity)}; }
};

// The other run leases `keys` (held while the result lives).
std::vector<pto::leases::Lease> take(LockDir& dir, std::vector<std::string> keys)
{
    auto taken = dir.try_take(keys);
    REQUIRE(taken);
    REQUIRE(std::holds_alternative<std::vector<pto::leases::Lease>>(*taken));
    return std::move(std::get<std::vector<pto::leases::Lease>>(*taken));
}

}  // namespace

TEST_SUITE("placement") {

TEST_CASE("a local grant holds ids by the pool's rule, and gives them back")
{
    auto p = local({0, 2, 3, 4});
    auto a = p.acquire({2, 0});
    REQUIRE(a);
    CHECK(a->devices == V{2, 3});
    CHECK(a->node.empty());
    auto b = p.acquire({3, 0});
    REQUIRE_FALSE(b);
    CHECK(b.error() == Shortage::devices);
    p.release(*a);
    CHECK(p.acquire({3, 0})->devices == V{2, 3, 4});
}

TEST_CASE("ports short: nothing is taken")
{
    auto p = local({0, 1});
    auto a = p.acquire({1, 1});
    REQUIRE_FALSE(a);
    CHECK(a.error() == Shortage::ports);
    CHECK(p.acquire({2, 0})->devices == V{0, 1});
}

TEST_CASE("withheld devices count no more, and the shortfall says so")
{
    auto p = local({0, 1, 2, 3});
    auto a = p.acquire({1, 0});
    REQUIRE(a);
    CHECK(p.usable_for({4, 0}));
    p.withhold(*a);
    CHECK_FALSE(p.usable_for({4, 0}));
    CHECK(p.usable_for({3, 0}));
    CHECK(p.shortfall({4, 0}) == "needs 4 devices but only 3 remain usable");
}

TEST_CASE("fits_after counts the freed grants' devices")
{
    auto p = local({0, 1, 2, 3});
    auto a = p.acquire({2, 0});
    auto b = p.acquire({1, 0});
    REQUIRE((a && b));
    const Grant* first[] = {&*b};
    const Grant* both[] = {&*b, &*a};
    CHECK_FALSE(p.fits_after({4, 0}, first));
    CHECK(p.fits_after({4, 0}, both));
}

TEST_CASE("Slurm nodes: the node with most free, counts only, one node per job")
{
    Placement p(std::make_unique<SlurmNodes>(std::vector<pto::SlurmNode>{{"n1", 2}, {"n2", 4}}), 1, 0);
    auto a = p.acquire({3, 0});
    REQUIRE(a);
    CHECK(a->node == "n2");
    CHECK(a->devices.empty());
    auto b = p.acquire({2, 0});
    REQUIRE(b);
    CHECK(b->node == "n1");
    CHECK_FALSE(p.acquire({2, 0}));  // n2 has 1 left, n1 none
    p.withhold(*a);
    CHECK_FALSE(p.usable_for({3, 0}));
    CHECK(p.shortfall({3, 0}) == "needs 3 devices but only 2 remain usable on one node");
    const Grant* freed[] = {&*b};
    CHECK_FALSE(p.fits_after({2, 0}, freed));  // no start is promised under Slurm
    p.release(*b);
    CHECK(p.acquire({2, 0})->node == "n1");
}

TEST_CASE("Slurm nodes: a node whose CPUs are all kept by withheld steps can start nothing more")
{
    Placement p(std::make_unique<SlurmNodes>(std::vector<pto::SlurmNode>{{"n1", 4, 2}, {"n2", 2, 0}}), 1, 0);
    auto a = p.acquire({1, 0});
    auto b = p.acquire({1, 0});
    REQUIRE(a);
    REQUIRE(b);
    REQUIRE(a->node == "n1");
    REQUIRE(b->node == "n1");
    CHECK_FALSE(p.withhold(*a));  // one CPU of two kept: n1 still has GPUs and a CPU
    CHECK(p.usable_for({3, 0}));
    CHECK(p.withhold(*b));  // both kept: n1 is out
    CHECK_FALSE(p.usable_for({3, 0}));
    CHECK(p.acquire({1, 0})->node == "n2");
    CHECK(p.shortfall({3, 0}) == "needs 3 devices but only 2 remain usable on one node");
    auto c = p.acquire({1, 0});
    REQUIRE(c);
    CHECK_FALSE(p.withhold(*c));  // CPUs not known (0): only its GPU goes
}

TEST_CASE("slots: the fullest device with room, whole devices only when nothing of them is taken")
{
    Placement p(std::make_unique<LocalDevices>(V{0, 1, 2}, 4), 1, 0);
    auto a = p.acquire({1, 0, 3});
    REQUIRE(a);
    CHECK(a->devices == V{0});
    auto b = p.acquire({1, 0, 2});  // 0 has 1 slot left: the next free device
    REQUIRE(b);
    CHECK(b->devices == V{1});
    auto c = p.acquire({1, 0, 1});  // the fullest with room: 0
    REQUIRE(c);
    CHECK(c->devices == V{0});
    auto whole = p.acquire({2, 0});
    CHECK_FALSE(whole);  // only 2 is untouched
    p.release(*b);
    whole = p.acquire({2, 0});
    REQUIRE(whole);
    CHECK(whole->devices == V{1, 2});
    CHECK_FALSE(p.acquire({1, 0, 1}));  // 0 is full, 1 and 2 are whole-held
    p.release(*a);
    CHECK(p.acquire({1, 0, 3})->devices == V{0});
}

TEST_CASE("slots: a withheld device stays out once its last slot is given back")
{
    Placement p(std::make_unique<LocalDevices>(V{0, 1}, 2), 1, 0);
    auto a = p.acquire({1, 0, 1});
    auto b = p.acquire({1, 0, 1});
    REQUIRE((a && b));
    CHECK(a->devices == b->devices);
    p.withhold(*a);
    p.release(*b);
    CHECK(p.acquire({1, 0})->devices == V{1});
    CHECK_FALSE(p.acquire({1, 0, 1}));
    CHECK_FALSE(p.usable_for({2, 0}));
}

TEST_CASE("slots: fits_after counts slots given back")
{
    Placement p(std::make_unique<LocalDevices>(V{0}, 4), 1, 0);
    auto a = p.acquire({1, 0, 3});
    REQUIRE(a);
    const Grant* freed[] = {&*a};
    CHECK_FALSE(p.fits_after({1, 0, 2}, {}));
    CHECK(p.fits_after({1, 0, 2}, freed));
    CHECK_FALSE(p.fits_after({1, 0}, {}));
    CHECK(p.fits_after({1, 0}, freed));
}

TEST_CASE("leases: a device another run holds is set aside, the next is taken, and the holder is named")
{
    TwoRuns runs;
    auto others = take(runs.other, {pto::leases::device_key("0")});
    Placement p(std::make_unique<LocalDevices>(V{0, 1, 2}), 1, 0, runs.leasing());
    auto a = p.acquire({2, 0});
    REQUIRE(a);
    CHECK(a->devices == V{1, 2});
    auto b = p.acquire({1, 0});
    REQUIRE_FALSE(b);
    CHECK(b.error() == Shortage::devices);
    REQUIRE(p.waiting());
    CHECK(p.waiting()->what == "device 0");
    CHECK(p.waiting()->holder.pid == getpid());
    // The run's own devices are leased: the other run cannot have them.
    auto busy = runs.other.try_take(std::vector<std::string>{pto::leases::device_key("1")});
    REQUIRE(busy);
    CHECK(std::holds_alternative<pto::leases::Busy>(*busy));

    others.clear();
    p.bring_back();
    CHECK_FALSE(p.waiting());
    CHECK(p.acquire({1, 0})->devices == V{0});
    p.release(*a);
    auto now = runs.other.try_take(std::vector<std::string>{pto::leases::device_key("1")});
    REQUIRE(now);
    CHECK(std::holds_alternative<std::vector<pto::leases::Lease>>(*now));
}

TEST_CASE("leases: jobs sharing a device's slots share its lease, given back with the last slot")
{
    TwoRuns runs;
    Placement p(std::make_unique<LocalDevices>(V{0}, 2), 1, 0, runs.leasing());
    auto a = p.acquire({1, 0, 1});
    auto b = p.acquire({1, 0, 1});
    REQUIRE((a && b));
    const std::vector<std::string> dev0{pto::leases::device_key("0")};
    p.release(*a);
    CHECK(std::holds_alternative<pto::leases::Busy>(*runs.other.try_take(dev0)));
    p.release(*b);
    CHECK(std::holds_alternative<std::vector<pto::leases::Lease>>(*runs.other.try_take(dev0)));
}

TEST_CASE("leases: a device is leased by its identity on the machine, a withheld one stays leased")
{
    TwoRuns runs;
    Placement p(std::make_unique<LocalDevices>(V{0, 1}), 1, 0,
                runs.leasing([](int id) { return "GPU-" + std::to_string(id) + "/a"; }));
    auto a = p.acquire({1, 0});
    REQUIRE(a);
    const std::vector<std::string> gpu0{pto::leases::device_key("GPU-0/a")};
    CHECK(std::holds_alternative<pto::leases::Busy>(*runs.other.try_take(gpu0)));
    CHECK(std::holds_alternative<std::vector<pto::leases::Lease>>(
        *runs.other.try_take(std::vector<std::string>{pto::leases::device_key("0")})));
    p.withhold(*a);
    CHECK(std::holds_alternative<pto::leases::Busy>(*runs.other.try_take(gpu0)));
}

TEST_CASE("leases: a port another run holds is waited for, not a port shortage")
{
    TwoRuns runs;
    // Ports far above the ranges other tests bind.
    auto others = take(runs.other, {pto::leases::port_key(47311)});
    Placement p(std::make_unique<LocalDevices>(V{}), 47311, 47312, runs.leasing());
    auto a = p.acquire({0, 1});
    REQUIRE(a);
    CHECK(a->ports == V{47312});
    auto b = p.acquire({0, 1});
    REQUIRE_FALSE(b);
    CHECK(b.error() == Shortage::leased);
    CHECK(p.waiting()->what == "port 47311");
    others.clear();
    p.bring_back();
    CHECK(p.acquire({0, 1})->ports == V{47311});
}

TEST_CASE("leases: a nested run's inherited leases are taken without waiting")
{
    TwoRuns runs;
    auto outer = take(runs.other, {pto::leases::device_key("3")});
    runs.ours.inherit({pto::leases::device_key("3")});
    Placement p(std::make_unique<LocalDevices>(V{3}), 1, 0, runs.leasing());
    CHECK(p.acquire({1, 0})->devices == V{3});
}

}
