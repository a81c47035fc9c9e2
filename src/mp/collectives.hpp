// The collectives of one spawn as an activity: they form one sequence for all
// ranks, so at most one is open; each rank's call is checked against the
// first one's and registered, and the last arrival makes it ready.
#pragma once

#include "mp/activity.hpp"
#include "mp/rank.hpp"
#include "mp/scheduler.hpp"

#include <pto/mp.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pto::mp::detail {

class Collectives final : public Activity {
public:
    Collectives(Scheduler& scheduler, std::span<Rank> ranks);

    // Registers `part` of rank `me`, or throws naming the mismatch (a call
    // unlike the open one waits for all ranks to know which is odd); false
    // where that cannot be thrown (Scheduler::throw_or_keep) and nothing was
    // registered.
    bool arrive(Rank& me, Part& part);
    // Takes back a part registered by a rank that failed before it waited.
    void withdraw(Rank& me, Part& part) noexcept;

    void complete_ready() noexcept override;
    void abandon() noexcept override;

    // "barrier #5 (3 of 4 arrived)", for a rank blocked on `part`.
    std::string describe(const Part& part) const;

private:
    bool check_overlap(Rank& me, const Part& part);
    bool judge(Rank& me, Part& part);
    void close() noexcept;

    Scheduler& scheduler_;
    std::span<Rank> ranks_;
    Part* first_ = nullptr;  // whose call the others must match
    int arrived_ = 0;
    unsigned long step_ = 0;      // among all collectives
    unsigned long ordinal_ = 0;   // among those of its kind
    std::vector<Part*> parts_;    // by rank
    std::vector<Part*> dissent_;  // by rank: calls unlike first_'s, waiting
    int dissenting_ = 0;
    std::shared_ptr<void> store_;  // see Part::make_store
    unsigned long steps_ = 0;
    std::map<Kind, unsigned long> kind_counts_;
};

}  // namespace pto::mp::detail
