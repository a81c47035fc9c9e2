#include "mp/scheduler.hpp"

#include "mp/kill_check.hpp"
#include "mp/messages.hpp"

// A rank finds its scheduler through its world.
#include "mp/world.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cassert>
#include <exception>
#include <iterator>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <utility>

namespace pto::mp::detail {

namespace {

// The rank running on this thread; null on the thread's own stack. Each
// context that switches away saves its value and puts it back when resumed.
// Initial-exec, as the SIGSEGV handler reads it: a plain load from the
// thread pointer.
__attribute__((tls_model("initial-exec"))) thread_local Rank* running = nullptr;

bool by_rank(const Rank* a, const Rank* b)
{
    return a->id < b->id;
}

}  // namespace

Scheduler::Scheduler(std::function<void(int)> fn, std::span<Rank> ranks, SpinLimit spin_limit, Reporter report)
    : fn_(std::move(fn)), ranks_(ranks), report_(std::move(report)), spin_limit_(spin_limit)
{
    // Reserved once, so that nothing the scheduler does between two switches
    // can fail for want of memory.
    round_.reserve(ranks.size());
    yielded_.reserve(ranks.size());
    woken_.reserve(ranks.size());
    for (Rank& rank : ranks) yielded_.push_back(&rank);  // the first round runs every rank
}

Rank& Scheduler::current(const char* caller)
{
    if (running == nullptr)
        throw std::logic_error(std::string("pto::mp::") + caller + "() called outside a rank");
    return *running;
}

bool Scheduler::in_rank() noexcept
{
    return running != nullptr;
}

int Scheduler::running_rank() noexcept
{
    const Rank* rank = running;
    return rank == nullptr ? -1 : rank->id;
}

bool Scheduler::being_killed() noexcept
{
    return running != nullptr && running->killed;
}

bool Scheduler::suspended() const noexcept
{
    return std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& rank) {
        return rank.started && rank.state != Rank::State::finished;
    });
}

bool Scheduler::unwind() noexcept
{
    unwind_started_ranks();
    return exiting_ != nullptr;
}

Outcome Scheduler::run(std::optional<Clock::time_point> deadline)
{
    for (;;) {
        for (Activity* activity : activities_) activity->complete_ready();
        std::sort(woken_.begin(), woken_.end(), by_rank);
        round_.clear();
        std::merge(yielded_.begin(), yielded_.end(), woken_.begin(), woken_.end(), std::back_inserter(round_),
                   by_rank);
        yielded_.clear();
        woken_.clear();
        if (round_.empty()) {
            if (finished_ == size()) return Completed{};
            return end_early(Deadlocked{report_(Stall::blocked), {}});
        }
        // The ranks of the round pass control straight to one another; only the
        // last comes back here.
        position_ = 0;
        resume(round_.front()->context);
        if (failure_) return end_early(*failure_);
        if (exiting_ != nullptr) return end_early(ThreadExit{});
        // A rank that waits, by yielding, for one that is blocked, has
        // returned or yields too may wait for ever. The clock is read only
        // once the rounds are spent.
        if (progress_) {
            idle_rounds_ = 0;
        } else if (spin_limit_.rounds != 0 && ++idle_rounds_ >= spin_limit_.rounds) {
            const auto now = spin_limit_.time.count() == 0 ? Clock::time_point{} : Clock::now();
            if (idle_rounds_ == spin_limit_.rounds) rounds_spent_at_ = now;
            if (now - rounds_spent_at_ >= spin_limit_.time) return end_early(Deadlocked{report_(Stall::spinning), {}});
        }
        progress_ = false;
        if (deadline && finished_ < size() && Clock::now() >= *deadline) return Paused{};
    }
}

// A pthread_exit beats whatever else ended the spawn, including one that a
// rank's destructor calls while the rank is being unwound.
Outcome Scheduler::end_early(Outcome outcome) noexcept
{
    unwind_started_ranks();
    if (exiting_ != nullptr) return ThreadExit{exiting_->context.suspended_eh_state()};
    if (auto* failed = std::get_if<Failed>(&outcome)) failed->notes = notes_;
    if (auto* deadlocked = std::get_if<Deadlocked>(&outcome)) {
        for (const auto& [rank, error] : unwound_)
            deadlocked->report += "\n  rank " + std::to_string(rank) + " was unwinding " +
                                  describe_exception(error) + " when it blocked";
        deadlocked->report += notes_;
        deadlocked->errors = unwound_;
    }
    return outcome;
}

Context& Scheduler::rank_main(void* arg) noexcept
{
    Rank& me = *static_cast<Rank*>(arg);
    Scheduler& scheduler = me.world->scheduler();
    running = &me;
    me.started = true;
    scheduler.run_body(me);
    me.state = Rank::State::finished;
    ++scheduler.finished_;
    scheduler.progress_ = true;
    return scheduler.next_context();
}

// The forced unwind of pthread_exit has no exception object, so the
// handler's reference is bound to null by the ABI itself; UBSan's null
// check would take that for our error.
__attribute__((no_sanitize("null"))) void Scheduler::run_body(Rank& me) noexcept
{
    std::exception_ptr escaped;
    try {
        // Its own copy, as each process of torch unpickles its own.
        std::function<void(int)> own = fn_;
        own(me.id);
    } catch (const RankKilled&) {
        // Unwound because the spawn ended, or after an error kept in
        // pending_error; not an error of its own.
    } catch (abi::__forced_unwind&) {
        // pthread_exit (or cancellation): the unwinding must go on, and it can
        // only end on the thread's own stack; this rank's part is done.
        hand_over_thread_exit(me);
    } catch (...) {
        escaped = std::current_exception();
    }
    // Only the first failure ends the spawn; anything that escapes a rank
    // being unwound is a consequence of it, except an exception it was
    // already unwinding when the spawn deadlocked.
    if (!stopping_) {
        if (escaped) {
            failure_ = Failed{{me.id}, escaped, {}};
        } else if (me.pending_error) {
            failure_ = Failed{me.pending_ranks, me.pending_error, {}};
        } else {
            return;
        }
        stopping_ = true;
    } else if (escaped && me.blocked_unwinding && !failure_) {
        unwound_.emplace(me.id, escaped);
    }
}

// Leaves the catch block open for good: ending it would make glibc abort
// ("exception not rethrown"). The spawning thread takes over the unwinding
// from the exception state this switch saves.
void Scheduler::hand_over_thread_exit(Rank& me) noexcept
{
    exiting_ = &me;
    stopping_ = true;
    me.state = Rank::State::finished;
    ++finished_;
    me.context.switch_to(main_);
    // Nothing resumes a rank that handed over its exit.
    std::abort();
}

// From the thread's own context, or from a rank that destroys a part-run
// spawn of its own: whatever ran here before runs here again after.
void Scheduler::resume(Context& to) noexcept
{
    Rank* const outer = std::exchange(running, nullptr);
    main_.switch_to(to);
    running = outer;
}

Context& Scheduler::next_context() noexcept
{
    if (!stopping_ && ++position_ < round_.size()) return round_[position_]->context;
    return main_;
}

void Scheduler::switch_away(Rank& me) noexcept
{
    Rank* const self = std::exchange(running, nullptr);
    me.context.switch_to(next_context());
    running = self;
}

// A throw in a rank that unwinds an exception ends the program unless a
// handler inside the destructor that runs takes it; that is not worth
// telling apart.
bool Scheduler::may_throw(const std::type_info& type, void* object)
{
    return std::uncaught_exceptions() == 0 && throw_would_be_caught(type, object);
}

void Scheduler::keep(Rank& me, std::vector<int> ranks, std::exception_ptr error) noexcept
{
    if (!me.pending_error) {
        me.pending_ranks = std::move(ranks);
        me.pending_error = std::move(error);
    }
    me.killed = true;
}

// A rank being unwound never suspends again. It gets the kill (again, if it
// swallowed it with catch (...)) where a throw reaches a handler; where it
// would end the program instead, in a destructor run by unwinding or at a
// noexcept boundary such as any destructor at a normal scope exit, the
// suspension point returns at once.
bool Scheduler::may_suspend(Rank& me, const char* point)
{
    me.last_point = point;
    if (me.working != nullptr) {
        throw_or_keep(me, std::logic_error(std::string("pto::mp::") + point + "() called inside " + me.working +
                                           "'s copy of its value; a rank cannot suspend inside a collective"));
        return false;
    }
    if (!me.killed) return true;
    if (++me.points_since_killed >= points_after_kill) abandon(me);
    RankKilled kill;
    if (may_throw(typeid(RankKilled), &kill)) throw kill;
    return false;
}

// Its stack stays as it is, with whatever it holds, until the spawn unmaps it:
// nothing else would end the spawn. The failure is the spawn's first, or else
// what the rank kept.
void Scheduler::abandon(Rank& me) noexcept
{
    if (!stopping_) {
        if (me.pending_error)
            failure_ = Failed{me.pending_ranks, me.pending_error, {}};
        else
            failure_ = Failed{{me.id}, std::make_exception_ptr(std::runtime_error(
                                           "pto::mp: rank went on communicating after an error")),
                              {}};
        stopping_ = true;
    }
    // Nothing is allocated on the way out if this fails: the note is a courtesy.
    try {
        notes_ += "\n  rank " + std::to_string(me.id) + " would not stop when killed: it reached " +
                  std::to_string(points_after_kill) + " more suspension points, the last " + me.last_point +
                  "(); it was left there, its destructors not run";
    } catch (...) {
    }
    me.state = Rank::State::finished;
    ++finished_;
    me.context.switch_to(main_);
    // Nothing resumes a rank that was left.
    std::abort();
}

void Scheduler::yield(Rank& me)
{
    if (!may_suspend(me, "yield")) return;
    yielded_.push_back(&me);
    switch_away(me);
    may_suspend(me, "yield");
}

bool Scheduler::block(Rank& me)
{
    me.state = Rank::State::blocked;
    me.blocked_unwinding = std::uncaught_exceptions() > 0;
    progress_ = true;
    switch_away(me);
    me.wait = std::monostate{};
    return may_suspend(me, me.last_point);
}

void Scheduler::fail_others(Rank& me, std::vector<int> ranks, std::exception_ptr error)
{
    // A rank unwinding its own exception stays the root cause.
    if (std::uncaught_exceptions() > 0) {
        keep(me, std::move(ranks), std::move(error));
        return;
    }
    if (!stopping_) {
        failure_ = Failed{std::move(ranks), std::move(error), {}};
        stopping_ = true;
    }
    me.killed = true;
    RankKilled kill;
    if (may_throw(typeid(RankKilled), &kill)) throw kill;
}

void Scheduler::keep_and_wake(Rank& rank, std::exception_ptr error) noexcept
{
    keep(rank, {rank.id}, std::move(error));
    // Cannot throw: woken_ has room for every rank, each woken once a round.
    wake(rank);
}

bool Scheduler::runs_here() const noexcept
{
    return running != nullptr && &running->world->scheduler() == this;
}

void Scheduler::wake(Rank& rank)
{
    rank.state = Rank::State::ready;
    woken_.push_back(&rank);
    progress_ = true;
}

void Scheduler::unwind_started_ranks() noexcept
{
    stopping_ = true;
    for (Activity* activity : activities_) activity->abandon();
    for (Rank& rank : ranks_) {
        if (!rank.started || rank.state == Rank::State::finished) continue;
        rank.killed = true;
        // It throws RankKilled where it was suspended and comes back here when
        // its body has been left.
        resume(rank.context);
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
