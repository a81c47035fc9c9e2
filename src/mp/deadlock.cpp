// What a deadlocked spawn reports: one line per rank, or, when there are many,
// one line per distinct state with its ranks as ranges.
#include "mp/messages.hpp"
#include "mp/world.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace pto::mp::detail {

namespace {

// Up to this many ranks, each gets its own line.
constexpr int one_line_each = 8;
// A report keeps this many lines; a ring of 10,000 recvs would give as many.
constexpr std::size_t max_lines = 20;

}  // namespace

std::string World::describe_wait(const Rank& rank) const
{
    if (rank.state == Rank::State::finished) return "returned";
    struct Describe {
        const World& world;
        std::string operator()(const CollectiveWait& wait) const { return world.collectives_.describe(*wait.part); }
        std::string operator()(const SendWait& wait) const { return world.mailbox_.describe(wait); }
        std::string operator()(const RecvWait& wait) const { return world.mailbox_.describe(wait); }
        // Only a spin report has ranks that are neither blocked nor returned.
        std::string operator()(std::monostate) const
        {
            return "yield() only, for " + std::to_string(world.scheduler_.idle_rounds()) + " rounds";
        }
    };
    return std::visit(Describe{*this}, rank.wait);
}

std::string World::deadlock_report() const
{
    return "spawn deadlocked: " + std::to_string(size() - scheduler_.finished()) + " of " + std::to_string(size()) +
           " ranks blocked, none can proceed" + rank_lines();
}

std::string World::spin_report() const
{
    std::vector<int> spinning;
    for (const Rank* rank : scheduler_.yielded()) spinning.push_back(rank->id);
    std::sort(spinning.begin(), spinning.end());
    int blocked = 0;
    for (const Rank& rank : ranks_)
        if (rank.state == Rank::State::blocked) ++blocked;
    const int returned = scheduler_.finished();
    std::string others;
    if (blocked > 0) others = std::to_string(blocked) + " of " + std::to_string(size()) + " ranks stayed blocked";
    if (returned > 0)
        others += (others.empty() ? "" : " and ") + std::to_string(returned) + " of " + std::to_string(size()) +
                  " ranks had returned";
    return "spawn deadlocked: " + rank_list(spinning) + " only yielded for " +
           std::to_string(scheduler_.idle_rounds()) + " rounds" + (others.empty() ? "" : " while " + others) +
           rank_lines() +
           "\n  (a longer spin needs a larger SpawnOptions::yield_only_rounds or yield_only_time; 0 rounds never "
           "gives up)";
}

std::string World::rank_lines() const
{
    std::vector<std::pair<std::string, std::vector<int>>> lines;  // in order of first rank
    std::unordered_map<std::string, std::size_t> line_of;
    for (const Rank& rank : ranks_) {
        std::string state = describe_wait(rank);
        if (size() > one_line_each) {
            const auto [it, added] = line_of.try_emplace(state, lines.size());
            if (!added) {
                lines[it->second].second.push_back(rank.id);
                continue;
            }
        }
        lines.emplace_back(std::move(state), std::vector<int>{rank.id});
    }
    std::string report;
    std::size_t more_ranks = 0;
    for (std::size_t i = 0; i < lines.size(); ++i) {
        if (i < max_lines)
            report += "\n  " + rank_list(lines[i].second) + ": " + lines[i].first;
        else
            more_ranks += lines[i].second.size();
    }
    if (lines.size() > max_lines)
        report += "\n  and " + std::to_string(more_ranks) + " more ranks in " +
                  std::to_string(lines.size() - max_lines) + " other states";
    return report;
}

}  // namespace pto::mp::detail
