// What a job needs and what it gets: one interface over the run's devices
// (a local pool, or a Slurm allocation's nodes) and its TCP ports. The loop
// asks it whether a job can have what it needs now and gives it back; it
// never asks which kind of devices it has.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "devices/leases.hpp"
#include "devices/port_pool.hpp"

namespace pto::placement {

struct Need {
    std::size_t devices = 0;
    std::size_t ports = 0;
    std::size_t slots = 0;  // > 0: this many slots of one device instead of whole devices
};

// What one job holds while it runs.
struct Grant {
    std::vector<int> devices;  // the ids, ascending (none under Slurm: Slurm picks them on the node)
    std::vector<int> ports;
    std::string node;          // under Slurm: the node the job goes to; empty otherwise
    std::size_t node_index = 0;
    std::size_t device_count = 0;  // what was granted, also where the ids are not known here
    std::size_t slots = 0;         // slots of its one device; 0: whole devices
};

// leased: what is short is held by another run (a lease), so waiting ends
// when it is given back; lease_failed: a lease could not even be tried
// (Placement::lease_error says why).
enum class Shortage { devices, ports, leased, lease_failed };

// Leases across runs (SPEC 10), as placement takes them.
struct Leasing {
    leases::LockDir* dir = nullptr;  // null: no leases, and no system call for them
    // A device id's identity on the machine, which names its lease; empty:
    // the id's number.
    std::function<std::string(int)> identity;
    // Says what the run should hear: a device left out for its lease file.
    std::function<void(const std::string&)> notice{};
};

// What another run holds that the head of the queue waits for, in words:
// "device 0", "port 40000"; and its holder.
struct Waiting {
    std::string what;
    leases::Holder holder;
    bool yielded = false;  // free, left to another run that waits for it
};

// The devices side: a pool of ids on this machine, or per-node counts.
class Devices {
public:
    virtual ~Devices() = default;
    // Fills `grant`'s device fields, or false when `count` whole devices
    // (with `slots` > 0: that many slots of one device) are not free now.
    virtual bool acquire(std::size_t count, std::size_t slots, Grant& grant) = 0;
    virtual void release(const Grant& grant) = 0;
    // Never handed out again in this run. True when where `grant` is can
    // then start no job any more (a node whose CPUs the steps kept there
    // all hold), the first time.
    virtual bool withhold(const Grant& grant) = 0;
    // Where `grant` is cannot start jobs any more (a node whose steps fail
    // to launch): nothing there is handed out again. True the first time.
    virtual bool lose(const Grant& grant) = 0;
    // The most devices one job can still get.
    virtual std::size_t usable() const = 0;
    // Whether `count` would be free once `freed` are back, from what is free
    // now; false where the start of a job is not this run's to promise.
    virtual bool fits_after(std::size_t count, std::size_t slots, std::span<const Grant* const> freed) const = 0;
    // How the shortfall is said: "" or " on one node".
    virtual const char* scope() const = 0;
    // Device `id` of `grant`, just acquired, is leased by another run: the
    // rest of `grant` goes back, and `id` is handed out no more until
    // bring_back().
    virtual void set_aside(const Grant& grant, int id) = 0;
    // Another run gave a lease back: what was set aside may be tried again.
    virtual void bring_back() = 0;
};

class Placement {
public:
    Placement(std::unique_ptr<Devices> devices, int port_low, int port_high, Leasing leasing = {});

    // Everything `need` asks for, now, leases included, or what is short
    // (nothing is taken then). A device or port another run holds is set
    // aside and others are tried, as for a device one of our jobs holds.
    tl::expected<Grant, Shortage> acquire(const Need& need);
    // Gives back what `grant` holds, its leases once no other grant of the
    // run holds them (jobs sharing a device's slots share its lease).
    void release(const Grant& grant);
    // Something of the job holding `grant` could not be stopped: its
    // leases stay held until the run ends. True as Devices::withhold.
    bool withhold(const Grant& grant);
    // Another run gave a lease back (LockDir::on_freed): what was set aside
    // is tried again at the next acquire.
    void bring_back();
    // The run has no job waiting any more (its queue is empty, or it stops
    // starting jobs): it no longer waits for other runs' leases, which are
    // then theirs to take again.
    void stop_waiting();
    // After an acquire that fell short: the lease of another run it met
    // last, if something is set aside now.
    const std::optional<Waiting>& waiting() const { return waiting_; }
    // After Shortage::lease_failed: why.
    const Error& lease_error() const { return lease_error_; }
    // Devices left out because their lease files cannot be used.
    const std::vector<int>& left_out() const { return left_out_; }
    // Where `grant` is can start no job any more; true the first time.
    bool lose(const Grant& grant) { return devices_->lose(grant); }

    // Whether `need` can still ever be met in this run.
    bool usable_for(const Need& need) const;
    // "needs 4 devices but only 3 remain usable" (" on one node" under Slurm).
    std::string shortfall(const Need& need) const;
    // Whether `need`'s devices would be free once `freed` are back (for
    // backfill's promise on when the head can start).
    bool fits_after(const Need& need, std::span<const Grant* const> freed) const;

    int port_low() const { return port_low_; }
    int port_high() const { return port_high_; }

private:
    struct Held {
        leases::Lease lease;
        std::size_t users = 0;  // grants of this run holding it
    };

    // The lease names of `grant`: its devices', then its ports'.
    std::vector<std::string> lease_keys(const Grant& grant) const;
    // Takes the leases of `grant` this run does not hold yet: the index in
    // lease_keys of one another run holds, if any.
    Expected<std::optional<std::size_t>> lease(const Grant& grant);
    void give_back(const Grant& grant);
    // After a lease error naming one of `grant`'s keys: that device or
    // port left out for good. False when the error names none of them.
    bool leave_out(const Grant& grant, const Error& why);

    std::unique_ptr<Devices> devices_;
    PortPool ports_;
    int port_low_;
    int port_high_;
    Leasing leasing_;
    std::map<std::string, Held, std::less<>> held_;
    std::set<int> aside_ports_;  // leased by another run when last tried
    std::optional<Waiting> waiting_;
    Error lease_error_;
    std::vector<int> left_out_;
};

}  // namespace pto::placement
