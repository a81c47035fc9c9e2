// The round-robin scheduler of one spawn: runs its ranks on the spawning
// thread, suspends and wakes them, and ends the spawn early when a rank fails,
// calls pthread_exit, or nothing can proceed. It knows a blocked rank only as
// blocked; the activities (activity.hpp) say when it may go on.
#pragma once

#include "mp/activity.hpp"
#include "mp/context.hpp"
#include "mp/rank.hpp"

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <typeinfo>
#include <variant>
#include <vector>

namespace pto::mp::detail {

// Thrown into a started rank to unwind it when its spawn ends early. Not a
// std::exception, so `catch (const std::exception&)` in user code lets it pass.
struct RankKilled {};

// How run() ended; the public API turns it into an exception.
struct Completed {};
struct Failed {
    std::vector<int> ranks;  // ascending; usually one
    std::exception_ptr error;
    std::string notes;  // lines about ranks that would not stop, each "\n  ..."
};
struct Deadlocked {
    std::string report;
    // What left the ranks that were unwinding an exception when they blocked.
    SpawnError::Errors errors;
};
// The time budget of a stepped run was spent; run() again to go on.
struct Paused {};
// A rank called pthread_exit: its stack has been unwound, the other ranks
// too, and what is left is to go on unwinding the thread (continue_thread_exit).
struct ThreadExit {
    EhState exiting;  // the rank's, inside its catch of the forced unwind
};
using Outcome = std::variant<Completed, Failed, Deadlocked, Paused, ThreadExit>;

// Goes on with the pthread_exit a rank began, on the calling thread's stack.
[[noreturn]] void continue_thread_exit(const ThreadExit& exit);

// Why no rank can run: all are blocked, or some only yield while the others
// are blocked.
enum class Stall : unsigned char { blocked, spinning };

// How long ranks may do nothing but yield: SpawnOptions::yield_only_rounds
// and yield_only_time.
struct SpinLimit {
    std::size_t rounds;
    std::chrono::nanoseconds time;
};

class Scheduler {
public:
    using Clock = std::chrono::steady_clock;
    // The deadlock report for a stall, written before the ranks are unwound.
    using Reporter = std::function<std::string(Stall)>;

    Scheduler(std::function<void(int)> fn, std::span<Rank> ranks, SpinLimit spin_limit, Reporter report);

    // Completed between rounds in the order added.
    void add_activity(Activity& activity) { activities_.push_back(&activity); }

    // The context of the thread that runs the ranks.
    Context& main() noexcept { return main_; }
    // Where each rank starts: `rank` is its Rank.
    static Context& rank_main(void* rank) noexcept;

    // Runs the ranks to the end, on the calling thread, outside any rank; with a
    // deadline, only until the first round that ends past it (Paused).
    Outcome run(std::optional<Clock::time_point> deadline);

    // Whether ranks have started and not finished: a run left off part-way.
    bool suspended() const noexcept;
    // Unwinds those ranks; true when one of them began a pthread_exit.
    bool unwind() noexcept;

    // The rank running on this thread; std::logic_error naming `caller` outside one.
    static Rank& current(const char* caller);
    static bool in_rank() noexcept;
    // The running rank's id, -1 outside one; async-signal-safe.
    static int running_rank() noexcept;
    // The running rank's spawn is ending and it is being unwound.
    static bool being_killed() noexcept;

    // Called by the rank `me` on its own stack at the suspension point named
    // `point`. false from may_suspend and block: the rank is being unwound,
    // or must not communicate, and returns at once.
    bool may_suspend(Rank& me, const char* point);
    void yield(Rank& me);
    bool block(Rank& me);
    // Makes a blocked rank run in the next round; from an activity.
    void wake(Rank& rank);
    // Throws `error`, the calling rank's own mistake at a suspension point,
    // where a handler takes it. Where the throw would end the program
    // instead (the rank unwinds an exception, or a noexcept frame comes
    // first) the rank stops communicating, its suspension points return at
    // once, and `error` fails the spawn when the rank ends, unless an
    // exception of its own leaves it. The caller then returns.
    template <class E>
    void throw_or_keep(Rank& me, E error)
    {
        if (may_throw(typeid(E), &error)) throw error;
        keep(me, {me.id}, std::make_exception_ptr(std::move(error)));
    }
    // Ends the spawn for an error of suspended ranks, found by another; the
    // calling rank `me` is then unwound: RankKilled is thrown where it can
    // be, and otherwise the caller returns.
    void fail_others(Rank& me, std::vector<int> ranks, std::exception_ptr error);
    // For a blocked rank that unwinds, whose call another rank found wrong:
    // `error` is kept in it as throw_or_keep would have, and it is woken to
    // return from its suspension point and go on unwinding.
    void keep_and_wake(Rank& rank, std::exception_ptr error) noexcept;
    // Whether the rank running on this thread is one of this spawn's.
    bool runs_here() const noexcept;

    // For the deadlock reports.
    int size() const noexcept { return static_cast<int>(ranks_.size()); }
    int finished() const noexcept { return finished_; }
    std::size_t idle_rounds() const noexcept { return idle_rounds_; }
    std::span<Rank* const> yielded() const noexcept { return yielded_; }

    // A killed rank reaching this many suspension points goes on for ever
    // (a retry loop around a swallowed kill, a destructor waiting for a
    // peer): it is left where it is and named.
    static constexpr std::size_t points_after_kill = 100'000;

private:
    static bool may_throw(const std::type_info& type, void* object);
    void keep(Rank& me, std::vector<int> ranks, std::exception_ptr error) noexcept;
    [[noreturn]] void abandon(Rank& me) noexcept;
    void run_body(Rank& me) noexcept;
    [[noreturn]] void hand_over_thread_exit(Rank& me) noexcept;
    Outcome end_early(Outcome outcome) noexcept;
    void resume(Context& to) noexcept;
    Context& next_context() noexcept;
    void switch_away(Rank& me) noexcept;
    void unwind_started_ranks() noexcept;

    std::function<void(int)> fn_;
    std::span<Rank> ranks_;
    std::vector<Activity*> activities_;
    Reporter report_;
    Context main_;

    // This round's ranks in rank order, and the next round's: those that yielded
    // (in order, as the round visits them) merged with those that were woken.
    std::vector<Rank*> round_;
    std::size_t position_ = 0;
    std::vector<Rank*> yielded_;
    std::vector<Rank*> woken_;

    int finished_ = 0;
    bool stopping_ = false;  // a rank failed or the ranks are being unwound
    std::optional<Failed> failure_;
    Rank* exiting_ = nullptr;  // a rank that called pthread_exit
    SpawnError::Errors unwound_;  // see Deadlocked::errors
    std::string notes_;           // see Failed::notes

    // A rank that only yields may be waiting for something only another
    // could do: after this many rounds in a row with nothing but yields, and
    // the time after them, the spawn counts as deadlocked (0 rounds: never).
    SpinLimit spin_limit_;
    std::size_t idle_rounds_ = 0;
    Clock::time_point rounds_spent_at_{};  // when idle_rounds_ reached the limit
    bool progress_ = false;  // this round did more than yield
};

}  // namespace pto::mp::detail
