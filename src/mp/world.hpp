// The ranks of one spawn and the round-robin scheduler that runs them on the
// spawning thread, with the collectives and send/recv pairs they wait on.
#pragma once

#include "mp/context.hpp"
#include "mp/overflow.hpp"
#include "mp/result.hpp"
#include "mp/stack.hpp"

#include <pto/mp.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace pto::mp::detail {

// Thrown into a started rank to unwind it when its spawn ends early. Not a
// std::exception, so `catch (const std::exception&)` in user code lets it pass.
struct RankKilled {};

class World;

struct Rank {
    enum class State : unsigned char { ready, blocked, finished };
    // What a blocked rank waits for.
    enum class Wait : unsigned char { nothing, collective, send, recv };

    World* world = nullptr;
    int id = 0;
    State state = State::ready;
    Wait wait = Wait::nothing;
    bool started = false;
    bool killed = false;
    int peer = -1;                 // send/recv
    Part* part = nullptr;          // collective
    Message* message = nullptr;    // send/recv
    Stack stack;
    Context context;
};

// How run() ended; the public API turns it into an exception.
struct Completed {};
struct Failed {
    int rank;
    std::exception_ptr error;
};
struct Deadlocked {
    std::string report;
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

class World {
public:
    struct Options {
        std::size_t usable_stack_bytes;  // see usable_stack_bytes()
        SwitchKind kind;
        std::size_t yield_only_rounds;
    };
    static Expected<std::unique_ptr<World>> create(std::function<void(int)> fn, int nprocs, Options options);
    World(const World&) = delete;
    World& operator=(const World&) = delete;
    ~World();

    using Clock = std::chrono::steady_clock;
    // Runs the ranks to the end, on the calling thread, outside any rank; with a
    // deadline, only until the first round that ends past it (Paused).
    Outcome run(std::optional<Clock::time_point> deadline = std::nullopt);

    int size() const noexcept { return nprocs_; }

    // The rank running on this thread; std::logic_error naming `caller` outside one.
    static Rank& current(const char* caller);
    static bool in_rank() noexcept;

    // Suspension points, called by the rank `me` on its own stack.
    void yield(Rank& me);
    bool arrive(Rank& me, Part& part);
    bool await(Rank& me);
    void withdraw(Rank& me, Part& part) noexcept;
    void send(Rank& me, Message& message, int dst);
    void recv(Rank& me, Message& message, int src);

private:
    // The collective ranks are arriving at. Collectives form one sequence for all
    // ranks, so at most one is open.
    struct Collective {
        Part* first = nullptr;  // whose call the others must match
        int first_rank = -1;
        int arrived = 0;
        unsigned long step = 0;      // among all collectives
        unsigned long ordinal = 0;   // among those of its kind
        std::vector<Part*> parts;    // by rank
        std::shared_ptr<void> store;   // see Part::make_store
    };

    World(std::function<void(int)> fn, int nprocs, std::size_t yield_only_rounds);

    static Context& rank_main(void* rank) noexcept;
    void run_body(Rank& me) noexcept;
    [[noreturn]] void hand_over_thread_exit(Rank& me) noexcept;
    Outcome run_rounds(std::optional<Clock::time_point> deadline);
    Outcome end_early(Outcome outcome) noexcept;
    Context& next_context() noexcept;
    void switch_away(Rank& me) noexcept;
    bool may_suspend(Rank& me);
    bool block(Rank& me);
    void wake(Rank& rank);
    void drain() noexcept;
    void complete_collective() noexcept;
    void unwind_started_ranks() noexcept;

    void check_overlap(const Rank& me, const Part& part) const;
    void check_peer(const Rank& me, int peer, const char* call) const;
    void match(Rank& sender, Rank& receiver);
    std::string describe_wait(const Rank& rank) const;
    std::string deadlock_report() const;
    std::string spin_report() const;
    std::string rank_lines() const;

    std::function<void(int)> fn_;
    int nprocs_;
    std::vector<Rank> ranks_;
    std::vector<GuardRegion> guards_;
    Context main_;

    // This round's ranks in rank order, and the next round's: those that yielded
    // (in order, as the round visits them) merged with those the drain woke.
    std::vector<Rank*> round_;
    std::size_t position_ = 0;
    std::vector<Rank*> yielded_;
    std::vector<Rank*> woken_;

    std::vector<std::pair<Rank*, Rank*>> matches_;  // sender, receiver; in match order
    Collective collective_;
    unsigned long steps_ = 0;
    std::array<unsigned long, 4> kind_counts_{};

    int finished_ = 0;
    bool stopping_ = false;  // a rank failed or the ranks are being unwound
    std::optional<Failed> failure_;
    Rank* exiting_ = nullptr;  // a rank that called pthread_exit

    // A rank that only yields while another is blocked may be waiting for
    // something only a blocked rank could do: after this many rounds in a
    // row with nothing but yields, the spawn counts as deadlocked (0: never).
    std::size_t yield_only_rounds_;
    std::size_t idle_rounds_ = 0;
    bool progress_ = false;  // this round did more than yield
};

}  // namespace pto::mp::detail
