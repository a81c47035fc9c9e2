// What ranks block on: a collective, a mailbox. Each owns its matching and
// its completion; the scheduler only asks it, between rounds, to complete
// what the round made ready, and to forget everything when the ranks are
// unwound.
#pragma once

namespace pto::mp::detail {

class Activity {
public:
    // On the spawning thread, between rounds: completes what is ready and
    // wakes its ranks through the scheduler.
    virtual void complete_ready() noexcept = 0;
    // The parts and messages it points at live on stacks about to be unwound.
    virtual void abandon() noexcept = 0;

protected:
    Activity() = default;
    Activity(const Activity&) = default;
    Activity& operator=(const Activity&) = default;
    ~Activity() = default;
};

}  // namespace pto::mp::detail
