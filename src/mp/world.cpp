#include "mp/world.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <utility>

namespace pto::mp::detail {

World::World(std::function<void(int)> fn, int nprocs, SpinLimit spin_limit)
    : ranks_(static_cast<std::size_t>(nprocs)),
      scheduler_(std::move(fn), ranks_, spin_limit, [this](Stall stall) { return report(stall); }),
      collectives_(scheduler_, ranks_),
      mailbox_(scheduler_, ranks_)
{
    // send/recv pairs first, in the order they matched, then the collective:
    // completing either only wakes ranks, so one pass per round suffices.
    scheduler_.add_activity(mailbox_);
    scheduler_.add_activity(collectives_);
    guards_.reserve(ranks_.size());
}

Expected<std::unique_ptr<World>> World::create(std::function<void(int)> fn, int nprocs, Options options)
{
    const auto n = static_cast<std::size_t>(nprocs);
    if (auto budget = check_map_budget(n); !budget) return tl::unexpected(budget.error());
    std::unique_ptr<World> world(new World(std::move(fn), nprocs, options.spin_limit));
    world->scheduler_.main().adopt_thread(options.kind);
    // After the world, so gone before it: the stacks keep their chunks.
    StackCarver stacks(n, options.usable_stack_bytes);
    for (int id = 0; id < nprocs; ++id) {
        Rank& rank = world->ranks_[static_cast<std::size_t>(id)];
        rank.world = world.get();
        rank.id = id;
        auto stack = stacks.next();
        if (!stack) return tl::unexpected(stack.error());
        rank.stack = std::move(*stack);
        const auto guard = rank.stack.guard();
        world->guards_.push_back({reinterpret_cast<std::uintptr_t>(guard.data()),
                                  reinterpret_cast<std::uintptr_t>(guard.data() + guard.size()), id,
                                  options.usable_stack_bytes});
        if (auto ok = rank.context.prepare(options.kind, rank.stack.usable(), &Scheduler::rank_main, &rank); !ok)
            return tl::unexpected(ok.error());
    }
    return world;
}

World::~World()
{
    // The stack it runs on would be unmapped under it.
    if (scheduler_.runs_here()) {
        static constexpr char refused[] =
            "pto::mp: a rank destroyed (or moved over) the SpawnContext of its own spawn; it can only be "
            "destroyed once its join() has returned\n";
        // Nothing else can be done about a stderr that will not take it.
        [[maybe_unused]] const auto written = ::write(STDERR_FILENO, refused, sizeof refused - 1);
        std::abort();
    }
    // Only a stepped run left off part-way has ranks to unwind here.
    if (!scheduler_.suspended()) return;
    const OverflowReport report(guards_);
    // A destructor cannot carry on a pthread_exit that a rank's own
    // destructor began; natively, that would not return either.
    if (scheduler_.unwind()) std::terminate();
}

Outcome World::run(std::optional<Clock::time_point> deadline)
{
    const OverflowReport report(guards_);
    return scheduler_.run(deadline);
}

std::string World::report(Stall stall) const
{
    return stall == Stall::blocked ? deadlock_report() : spin_report();
}

}  // namespace pto::mp::detail
