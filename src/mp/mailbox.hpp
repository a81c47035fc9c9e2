// send/recv as an activity: a call that finds its peer already waiting for
// it matches at once; the pairs are copied between rounds, in the order they
// matched.
#pragma once

#include "mp/activity.hpp"
#include "mp/rank.hpp"
#include "mp/scheduler.hpp"

#include <pto/mp.hpp>

#include <span>
#include <string>
#include <utility>
#include <vector>

namespace pto::mp::detail {

class Mailbox final : public Activity {
public:
    Mailbox(Scheduler& scheduler, std::span<Rank> ranks);

    void send(Rank& me, Message& message, int dst);
    void recv(Rank& me, Message& message, int src);

    void complete_ready() noexcept override;
    void abandon() noexcept override;

    // "send(4 x int) to rank 2", for a rank blocked in send or recv.
    std::string describe(const SendWait& wait) const;
    std::string describe(const RecvWait& wait) const;

private:
    // false where the error could not be thrown (Scheduler::throw_or_keep).
    bool check_peer(Rank& me, int peer, const char* call);
    std::string peer_note(int peer) const;

    Scheduler& scheduler_;
    std::span<Rank> ranks_;
    std::vector<std::pair<Rank*, Rank*>> matches_;  // sender, receiver; in match order
};

}  // namespace pto::mp::detail
