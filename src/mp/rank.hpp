// One rank of a spawn: its stack, its context, and what it waits on. The
// scheduler knows only whether a rank is ready, blocked or finished; what a
// blocked rank waits on belongs to the activity that will wake it.
#pragma once

#include "mp/context.hpp"
#include "mp/stack.hpp"

#include <pto/mp.hpp>

#include <cstddef>
#include <exception>
#include <variant>
#include <vector>

namespace pto::mp::detail {

class World;

// Waiting at the open collective (Collectives).
struct CollectiveWait {
    Part* part;
};
// Waiting for a peer to take or give a message (Mailbox).
struct SendWait {
    int peer;
    Message* message;
};
struct RecvWait {
    int peer;
    Message* message;
};
using Wait = std::variant<std::monostate, CollectiveWait, SendWait, RecvWait>;

struct Rank {
    enum class State : unsigned char { ready, blocked, finished };

    World* world = nullptr;
    int id = 0;
    State state = State::ready;
    bool started = false;
    // Its suspension points return at once, or throw the kill: the spawn is
    // ending, or the rank met an error it could not be thrown while it unwound.
    bool killed = false;
    // Blocked while unwinding an exception: should the spawn deadlock, that
    // exception, if it leaves the rank, is kept.
    bool blocked_unwinding = false;
    // The collective whose own work it is doing (all_gather's copy of its
    // value), where it must not suspend; null elsewhere.
    const char* working = nullptr;
    // The last suspension point it reached, and how many since it was killed.
    const char* last_point = nullptr;
    std::size_t points_since_killed = 0;
    // An error found at a suspension point while the rank unwound, which
    // would have ended the program if thrown: the spawn's failure, unless an
    // exception of its own leaves the rank.
    std::vector<int> pending_ranks;
    std::exception_ptr pending_error;
    Wait wait;
    Stack stack;
    Context context;
};

}  // namespace pto::mp::detail
