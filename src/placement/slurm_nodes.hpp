// The nodes of a Slurm allocation: Slurm picks which of a node's GPUs a step
// gets, so only how many each node has free matters here, and a job's
// devices are always on one node.
#pragma once

#include <string>
#include <vector>

#include <pto/scheduler.hpp>

#include "placement/placement.hpp"

namespace pto::placement {

class SlurmNodes final : public Devices {
public:
    explicit SlurmNodes(const std::vector<SlurmNode>& nodes);

    // Slots are not shared under Slurm (the command line refuses them): a
    // job of slots takes its one GPU.
    bool acquire(std::size_t count, std::size_t slots, Grant& grant) override;
    void release(const Grant& grant) override;
    // A step that stays (quarantined, or holding a sick GPU) keeps its GPUs
    // and a CPU of its node: once such steps keep all its CPUs, the node is
    // lost.
    bool withhold(const Grant& grant) override;
    // A node whose steps fail to launch: out of the pool.
    bool lose(const Grant& grant) override;
    std::size_t usable() const override;
    // Slurm decides when a step starts: no start is this run's to promise.
    bool fits_after(std::size_t, std::size_t, std::span<const Grant* const>) const override { return false; }
    const char* scope() const override { return " on one node"; }
    // The nodes are Slurm's to share: no leases are taken under Slurm.
    void set_aside(const Grant& grant, int) override { release(grant); }
    void bring_back() override {}

private:
    struct Node {
        std::string name;
        std::size_t free = 0;
        std::size_t usable = 0;  // less what quarantined steps keep
        std::size_t cpus = 0;    // 0: not known
        std::size_t kept = 0;    // steps that stay until the run ends
        bool lost = false;       // its steps fail to launch, or it has no CPU left
    };
    std::vector<Node> nodes_;
};

}  // namespace pto::placement
