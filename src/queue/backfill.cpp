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
        // Only a job still holding its devices past the shadow time kept the
        // head waiting, and only for as long as it held them then; one that
        // ended before, however late by its own history, delayed nothing.
        const auto held_until = std::min(now, it->ended.value_or(now));
        if (held_until > it->shadow && held_until > it->promised)
            delays.push_back({it->job, held_until - it->shadow});
        it = ahead_.erase(it);
    }
    return delays;
}

}  // namespace pto::queue
