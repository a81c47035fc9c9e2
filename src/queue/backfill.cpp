#include "queue/backfill.hpp"

#include <algorithm>

namespace pto::queue {

std::optional<Clock::time_point> shadow_time(const placement::Need& head, std::vector<RunningEnd> running,
                                             const placement::Placement& placement)
{
    std::sort(running.begin(), running.end(),
              [](const RunningEnd& a, const RunningEnd& b) { return a.expected < b.expected; });
    std::vector<const placement::Grant*> freed;
    for (const auto& r : running) {
        freed.push_back(r.held);
        if (placement.fits_after(head, freed))
            return r.expected;
    }
    return std::nullopt;
}

void Ledger::went_ahead(std::size_t job, std::size_t head, Clock::time_point promised, Clock::time_point shadow)
{
    ahead_.push_back({job, head, promised, shadow, std::nullopt});
}

void Ledger::ended(std::size_t job, Clock::time_point at)
{
    for (auto& a : ahead_)
        if (a.job == job)
            a.ended = at;
}

std::vector<Delay> Ledger::head_started(std::size_t head, Clock::time_point now)
{
    std::vector<Delay> delays;
    for (auto it = ahead_.begin(); it != ahead_.end();) {
        if (it->head != head) {
            ++it;
            continue;
        }
        const auto ended = it->ended.value_or(now);
        if (now > it->shadow && ended > it->promised)
            delays.push_back({it->job, now - it->shadow});
        it = ahead_.erase(it);
    }
    return delays;
}

}  // namespace pto::queue
