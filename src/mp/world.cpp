#include "mp/world.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cassert>
#include <exception>
#include <iterator>
#include <stdexcept>
#include <string>

namespace pto::mp::detail {

namespace {

thread_local Rank* running = nullptr;  // null on the spawning thread's own stack

bool by_rank(const Rank* a, const Rank* b)
{
    return a->id < b->id;
}

}  // namespace

World::World(std::function<void(int)> fn, int nprocs, std::size_t yield_only_rounds)
    : fn_(std::move(fn)),
      nprocs_(nprocs),
      ranks_(static_cast<std::size_t>(nprocs)),
      yield_only_rounds_(yield_only_rounds)
{
    // Reserved once, so that nothing the scheduler does between two switches
    // can fail for want of memory.
    const auto n = static_cast<std::size_t>(nprocs);
    round_.reserve(n);
    yielded_.reserve(n);
    woken_.reserve(n);
    matches_.reserve(n / 2);
    collective_.parts.assign(n, nullptr);
    guards_.reserve(n);
}

Expected<std::unique_ptr<World>> World::create(std::function<void(int)> fn, int nprocs, Options options)
{
    const auto n = static_cast<std::size_t>(nprocs);
    if (auto budget = check_map_budget(n); !budget) return tl::unexpected(budget.error());
    std::unique_ptr<World> world(new World(std::move(fn), nprocs, options.yield_only_rounds));
    world->main_.adopt_thread(options.kind);
    for (int id = 0; id < nprocs; ++id) {
        Rank& rank = world->ranks_[static_cast<std::size_t>(id)];
        rank.world = world.get();
        rank.id = id;
        auto stack = Stack::map(options.usable_stack_bytes);
        if (!stack) return tl::unexpected(stack.error());
        rank.stack = std::move(*stack);
        const auto guard = rank.stack.guard();
        world->guards_.push_back({reinterpret_cast<std::uintptr_t>(guard.data()),
                                  reinterpret_cast<std::uintptr_t>(guard.data() + guard.size()), id,
                                  options.usable_stack_bytes});
        if (auto ok = rank.context.prepare(options.kind, rank.stack.usable(), &World::rank_main, &rank); !ok)
            return tl::unexpected(ok.error());
        world->yielded_.push_back(&rank);  // the first round runs every rank
    }
    return world;
}

World::~World()
{
    const bool suspended = std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& rank) {
        return rank.started && rank.state != Rank::State::finished;
    });
    // Only a stepped run left off part-way has ranks to unwind here.
    if (suspended) {
        const OverflowReport report(guards_);
        unwind_started_ranks();
        // A destructor cannot carry on a pthread_exit that a rank's own
        // destructor began; natively, that would not return either.
        if (exiting_ != nullptr) std::terminate();
    }
}

Rank& World::current(const char* caller)
{
    if (running == nullptr)
        throw std::logic_error(std::string("pto::mp::") + caller + "() called outside a rank");
    return *running;
}

bool World::in_rank() noexcept
{
    return running != nullptr;
}

Outcome World::run(std::optional<Clock::time_point> deadline)
{
    const OverflowReport report(guards_);
    return run_rounds(deadline);
}

Outcome World::run_rounds(std::optional<Clock::time_point> deadline)
{
    for (;;) {
        drain();
        std::sort(woken_.begin(), woken_.end(), by_rank);
        round_.clear();
        std::merge(yielded_.begin(), yielded_.end(), woken_.begin(), woken_.end(), std::back_inserter(round_),
                   by_rank);
        yielded_.clear();
        woken_.clear();
        if (round_.empty()) {
            if (finished_ == nprocs_) return Completed{};
            return end_early(Deadlocked{deadlock_report()});
        }
        // The ranks of the round pass control straight to one another; only the
        // last comes back here.
        position_ = 0;
        main_.switch_to(round_.front()->context);
        running = nullptr;
        if (failure_) return end_early(*failure_);
        if (exiting_ != nullptr) return end_early(ThreadExit{});
        const bool someone_blocked = yielded_.size() + static_cast<std::size_t>(finished_) <
                                     static_cast<std::size_t>(nprocs_);
        if (progress_ || !someone_blocked) {
            idle_rounds_ = 0;
        } else if (yield_only_rounds_ != 0 && ++idle_rounds_ >= yield_only_rounds_) {
            return end_early(Deadlocked{spin_report()});
        }
        progress_ = false;
        if (deadline && finished_ < nprocs_ && Clock::now() >= *deadline) return Paused{};
    }
}

// A pthread_exit beats whatever else ended the spawn, including one that a
// rank's destructor calls while the rank is being unwound.
Outcome World::end_early(Outcome outcome) noexcept
{
    unwind_started_ranks();
    if (exiting_ != nullptr) return ThreadExit{exiting_->context.suspended_eh_state()};
    return outcome;
}

Context& World::rank_main(void* arg) noexcept
{
    Rank& me = *static_cast<Rank*>(arg);
    running = &me;
    me.started = true;
    World& world = *me.world;
    world.run_body(me);
    me.state = Rank::State::finished;
    ++world.finished_;
    world.progress_ = true;
    return world.next_context();
}

void World::run_body(Rank& me) noexcept
{
    try {
        fn_(me.id);
    } catch (const RankKilled&) {
        // Unwound because the spawn ended; not an error of this rank.
    } catch (abi::__forced_unwind&) {
        // pthread_exit (or cancellation): the unwinding must go on, and it can
        // only end on the thread's own stack; this rank's part is done.
        hand_over_thread_exit(me);
    } catch (...) {
        // Only the first failure ends the spawn; anything that escapes a rank
        // being unwound is a consequence of it.
        if (!me.killed && !stopping_) {
            failure_ = Failed{me.id, std::current_exception()};
            stopping_ = true;
        }
    }
}

// Leaves the catch block open for good: ending it would make glibc abort
// ("exception not rethrown"). The spawning thread takes over the unwinding
// from the exception state this switch saves.
void World::hand_over_thread_exit(Rank& me) noexcept
{
    exiting_ = &me;
    stopping_ = true;
    me.state = Rank::State::finished;
    ++finished_;
    me.context.switch_to(main_);
    // Nothing resumes a rank that handed over its exit.
    std::abort();
}

Context& World::next_context() noexcept
{
    if (!stopping_ && ++position_ < round_.size()) return round_[position_]->context;
    return main_;
}

void World::switch_away(Rank& me) noexcept
{
    me.context.switch_to(next_context());
    running = &me;
}

// A rank being unwound never suspends again. Outside unwinding it gets the kill
// (again, if it swallowed it with catch (...)); in a destructor run by unwinding,
// a throw would terminate the program, so the suspension point returns at once.
bool World::may_suspend(Rank& me)
{
    if (!me.killed) return true;
    if (std::uncaught_exceptions() == 0) throw RankKilled{};
    return false;
}

void World::yield(Rank& me)
{
    if (!may_suspend(me)) return;
    yielded_.push_back(&me);
    switch_away(me);
    may_suspend(me);
}

bool World::block(Rank& me)
{
    me.state = Rank::State::blocked;
    progress_ = true;
    switch_away(me);
    me.wait = Rank::Wait::nothing;
    return may_suspend(me);
}

void World::wake(Rank& rank)
{
    rank.state = Rank::State::ready;
    woken_.push_back(&rank);
    progress_ = true;
}

// The seed's _drain_pending: send/recv pairs first, in the order they matched,
// then the collective, if every rank has arrived. One pass suffices: finishing
// either only wakes ranks, and only running ranks create new work.
void World::drain() noexcept
{
    for (auto [sender, receiver] : matches_) {
        receiver->message->copy(sender->message->in, receiver->message->out, receiver->message->count);
        wake(*sender);
        wake(*receiver);
    }
    matches_.clear();
    if (collective_.first != nullptr && collective_.arrived == nprocs_) complete_collective();
}

void World::unwind_started_ranks() noexcept
{
    stopping_ = true;
    // The parts and messages live on the stacks about to be unwound.
    matches_.clear();
    std::fill(collective_.parts.begin(), collective_.parts.end(), nullptr);
    collective_.first = nullptr;
    collective_.arrived = 0;
    collective_.store.reset();
    for (Rank& rank : ranks_) {
        if (!rank.started || rank.state == Rank::State::finished) continue;
        rank.killed = true;
        // It throws RankKilled where it was suspended and comes back here when
        // its body has been left.
        main_.switch_to(rank.context);
        running = nullptr;
        assert(rank.state == Rank::State::finished);
    }
}

void continue_thread_exit(const ThreadExit& exit)
{
    EhState& thread = thread_eh_state();
    // The forced unwind is a foreign exception, and the C++ runtime cannot
    // stack one on an exception already being handled: natively too, catching
    // pthread_exit's unwinding inside a catch block terminates.
    if (thread.caught_exceptions != nullptr) std::terminate();
    thread.caught_exceptions = exit.exiting.caught_exceptions;
    // Rethrows what the rank caught: the unwinding goes on from this frame,
    // through the spawner's, and ends the thread as pthread_exit does.
    throw;
}

}  // namespace pto::mp::detail
