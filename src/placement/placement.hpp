// What a job needs and what it gets: one interface over the run's devices
// (a local pool, or a Slurm allocation's nodes) and its TCP ports. The loop
// asks it whether a job can have what it needs now and gives it back; it
// never asks which kind of devices it has.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <tl/expected.hpp>

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

enum class Shortage { devices, ports };

// The devices side: a pool of ids on this machine, or per-node counts.
class Devices {
public:
    virtual ~Devices() = default;
    // Fills `grant`'s device fields, or false when `count` whole devices
    // (with `slots` > 0: that many slots of one device) are not free now.
    virtual bool acquire(std::size_t count, std::size_t slots, Grant& grant) = 0;
    virtual void release(const Grant& grant) = 0;
    // Never handed out again in this run.
    virtual void withhold(const Grant& grant) = 0;
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
};

class Placement {
public:
    Placement(std::unique_ptr<Devices> devices, int port_low, int port_high);

    // Everything `need` asks for, now, or what is short (nothing is taken then).
    tl::expected<Grant, Shortage> acquire(const Need& need);
    void release(const Grant& grant);
    // Something of the job holding `grant` could not be stopped.
    void withhold(const Grant& grant);
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
    std::unique_ptr<Devices> devices_;
    PortPool ports_;
    int port_low_;
    int port_high_;
};

}  // namespace pto::placement
