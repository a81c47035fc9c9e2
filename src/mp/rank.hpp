// One rank of a spawn: its stack, its context, and what it waits on. The
// scheduler knows only whether a rank is ready, blocked or finished; what a
// blocked rank waits on belongs to the activity that will wake it.
#pragma once

#include "mp/context.hpp"
#include "mp/stack.hpp"

#include <pto/mp.hpp>

#include <variant>

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
    bool killed = false;
    Wait wait;
    Stack stack;
    Context context;
};

}  // namespace pto::mp::detail
