// One spawn: its ranks on their guarded stacks, the scheduler that runs them,
// and the activities they block on.
#pragma once

#include "mp/collectives.hpp"
#include "mp/context.hpp"
#include "mp/mailbox.hpp"
#include "mp/overflow.hpp"
#include "mp/rank.hpp"
#include "mp/result.hpp"
#include "mp/scheduler.hpp"

#include <pto/mp.hpp>

#include <pthread.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pto::mp::detail {

class World {
public:
    struct Options {
        std::size_t usable_stack_bytes;  // see usable_stack_bytes()
        SwitchKind kind;
        SpinLimit spin_limit;
    };
    static Expected<std::unique_ptr<World>> create(std::function<void(int)> fn, int nprocs, Options options);
    World(const World&) = delete;
    World& operator=(const World&) = delete;
    ~World();

    using Clock = Scheduler::Clock;
    // Runs the ranks to the end, on the calling thread, outside any rank; with a
    // deadline, only until the first round that ends past it (Paused).
    Outcome run(std::optional<Clock::time_point> deadline = std::nullopt);

    int size() const noexcept { return static_cast<int>(ranks_.size()); }
    bool on_spawning_thread() const noexcept { return pthread_equal(pthread_self(), spawner_) != 0; }

    Scheduler& scheduler() noexcept { return scheduler_; }
    Collectives& collectives() noexcept { return collectives_; }
    Mailbox& mailbox() noexcept { return mailbox_; }

private:
    World(std::function<void(int)> fn, int nprocs, SpinLimit spin_limit);

    std::string report(Stall stall) const;
    std::string describe_wait(const Rank& rank) const;
    std::string deadlock_report() const;
    std::string spin_report() const;
    std::string rank_lines() const;

    std::vector<Rank> ranks_;
    std::vector<GuardRegion> guards_;
    pthread_t spawner_ = pthread_self();
    Scheduler scheduler_;
    Collectives collectives_;
    Mailbox mailbox_;
};

}  // namespace pto::mp::detail
