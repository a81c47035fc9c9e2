// What a deadlocked spawn reports: one line per rank, or, when there are many,
// one line per distinct state with its ranks as ranges.
#include "mp/messages.hpp"
#include "mp/world.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pto::mp::detail {

namespace {

// Up to this many ranks, each gets its own line.
constexpr int one_line_each = 8;

}  // namespace

std::string World::describe_wait(const Rank& rank) const
{
    if (rank.state == Rank::State::finished) return "returned";
    const auto peer_note = [&] {
        return ranks_[static_cast<std::size_t>(rank.peer)].state == Rank::State::finished
                   ? " (rank " + std::to_string(rank.peer) + " has returned)"
                   : std::string();
    };
    switch (rank.wait) {
    case Rank::Wait::collective: {
        std::string arguments = describe_arguments(*rank.part);
        if (!arguments.empty()) arguments += "; ";
        return kind_name(rank.part->kind) + (" #" + std::to_string(collective_.ordinal)) + " (" + arguments +
               std::to_string(collective_.arrived) + " of " + std::to_string(nprocs_) + " arrived)";
    }
    case Rank::Wait::send:
        return "send(" + describe_elements(rank.message->count, *rank.message->type) + ") to rank " +
               std::to_string(rank.peer) + peer_note();
    case Rank::Wait::recv:
        return "recv(" + describe_elements(rank.message->count, *rank.message->type) + ") from rank " +
               std::to_string(rank.peer) + peer_note();
    case Rank::Wait::nothing: break;
    }
    // Only a spin report has ranks that are neither blocked nor returned.
    return "yield() only, for " + std::to_string(idle_rounds_) + " rounds";
}

std::string World::deadlock_report() const
{
    return "spawn deadlocked: " + std::to_string(nprocs_ - finished_) + " of " + std::to_string(nprocs_) +
           " ranks blocked, none can proceed" + rank_lines();
}

std::string World::spin_report() const
{
    std::vector<int> spinning;
    for (const Rank* rank : yielded_) spinning.push_back(rank->id);
    std::sort(spinning.begin(), spinning.end());
    int blocked = 0;
    for (const Rank& rank : ranks_)
        if (rank.state == Rank::State::blocked) ++blocked;
    return "spawn deadlocked: " + rank_list(spinning) + " only yielded for " + std::to_string(idle_rounds_) +
           " rounds while " + std::to_string(blocked) + " of " + std::to_string(nprocs_) +
           " ranks stayed blocked" + rank_lines();
}

std::string World::rank_lines() const
{
    std::vector<std::pair<std::string, std::vector<int>>> lines;  // in order of first rank
    std::unordered_map<std::string, std::size_t> line_of;
    for (const Rank& rank : ranks_) {
        std::string state = describe_wait(rank);
        if (nprocs_ > one_line_each) {
            const auto [it, added] = line_of.try_emplace(state, lines.size());
            if (!added) {
                lines[it->second].second.push_back(rank.id);
                continue;
            }
        }
        lines.emplace_back(std::move(state), std::vector<int>{rank.id});
    }
    std::string report;
    for (const auto& [state, ranks] : lines) report += "\n  " + rank_list(ranks) + ": " + state;
    return report;
}

}  // namespace pto::mp::detail
