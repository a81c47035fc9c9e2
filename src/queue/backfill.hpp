// EASY backfill's two questions, without processes: when can the waiting
// head start at the latest, by the running jobs' history; and, once it
// starts, did a job that went ahead of it delay it by running past its own
// history.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "placement/placement.hpp"

namespace pto::queue {

using Clock = std::chrono::steady_clock;

struct RunningEnd {
    Clock::time_point expected;    // by its history
    const placement::Grant* held;
};

// The earliest time by which enough running jobs will have ended for `head`
// to fit; nothing when no such time can be told.
std::optional<Clock::time_point> shadow_time(const placement::Need& head, std::vector<RunningEnd> running,
                                             const placement::Placement& placement);

struct Delay {
    std::size_t job;        // went ahead and ran past its history
    Clock::duration by;
};

// The jobs that went ahead of a head, and what history promised for them.
class Ledger {
public:
    void went_ahead(std::size_t job, std::size_t head, Clock::time_point promised, Clock::time_point shadow);
    void ended(std::size_t job, Clock::time_point at);
    // `head` starts at `now`: the jobs that went ahead of it and still ran
    // past the time it could have started, and how long past.
    std::vector<Delay> head_started(std::size_t head, Clock::time_point now);

private:
    struct Ahead {
        std::size_t job;
        std::size_t head;
        Clock::time_point promised;  // its history's end
        Clock::time_point shadow;    // when the head could start at the latest, as history said then
        std::optional<Clock::time_point> ended;
    };
    std::vector<Ahead> ahead_;
};

}  // namespace pto::queue
