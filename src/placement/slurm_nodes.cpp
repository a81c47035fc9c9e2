#include "placement/slurm_nodes.hpp"

#include <algorithm>
#include <utility>

namespace pto::placement {

SlurmNodes::SlurmNodes(const std::vector<SlurmNode>& nodes)
{
    for (const auto& n : nodes)
        nodes_.push_back({n.name, n.devices, n.devices, n.cpus, 0, false});
}

// The node with the most free GPUs among those that have `count` free (the
// first such in the allocation's order on a tie), so that steps spread over
// the nodes' CPUs.
bool SlurmNodes::acquire(std::size_t count, std::size_t slots, Grant& grant)
{
    if (slots > 0)
        count = 1;
    const Node* best = nullptr;
    for (const auto& n : nodes_)
        if (!n.lost && n.free >= count && (best == nullptr || n.free > best->free))
            best = &n;
    if (best == nullptr)
        return false;
    grant.node_index = static_cast<std::size_t>(best - nodes_.data());
    nodes_[grant.node_index].free -= count;
    grant.node = best->name;
    grant.device_count = count;
    return true;
}

void SlurmNodes::release(const Grant& grant)
{
    nodes_[grant.node_index].free += grant.device_count;
}

bool SlurmNodes::withhold(const Grant& grant)
{
    Node& n = nodes_[grant.node_index];
    n.usable -= grant.device_count;
    if (n.cpus == 0 || ++n.kept < n.cpus)
        return false;
    return !std::exchange(n.lost, true);
}

bool SlurmNodes::lose(const Grant& grant)
{
    return !std::exchange(nodes_[grant.node_index].lost, true);
}

std::size_t SlurmNodes::usable() const
{
    std::size_t most = 0;
    for (const auto& n : nodes_)
        if (!n.lost)
            most = std::max(most, n.usable);
    return most;
}

}  // namespace pto::placement
