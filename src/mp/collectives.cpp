// The collectives: a rank checks its call against its peers' and registers it
// on its own stack, where a mismatch fails the ranks that differ; the spawning thread
// then moves the data between rounds, in rank order.
#include "mp/collectives.hpp"

#include "mp/messages.hpp"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <exception>
#include <string>
#include <stdexcept>
#include <utility>
#include <vector>

namespace pto::mp::detail {

namespace {

bool same_call(const Part& a, const Part& b)
{
    if (a.kind != b.kind) return false;
    switch (a.kind) {
    case Kind::barrier: return true;
    case Kind::all_reduce: return *a.type == *b.type && a.count == b.count && a.op == b.op;
    case Kind::broadcast: return *a.type == *b.type && a.count == b.count && a.root == b.root;
    case Kind::all_gather: return *a.type == *b.type;
    }
    return false;
}

}  // namespace

Collectives::Collectives(Scheduler& scheduler, std::span<Rank> ranks)
    : scheduler_(scheduler), ranks_(ranks), parts_(ranks.size(), nullptr), dissent_(ranks.size(), nullptr)
{
}

// Buffers shared between ranks would make a reduction read what it already
// wrote: in torch each process has its own. Checked when the last rank
// arrives, before it registers, so that a caught error leaves nothing behind.
// The error is that rank's when it is at fault; when only ranks that wait
// are, it is theirs and ends the spawn.
bool Collectives::check_overlap(Rank& me, const Part& part)
{
    const int nprocs = scheduler_.size();
    if (part.data == nullptr || nprocs < 2) return true;
    struct Buffer {
        std::uintptr_t begin, end;
        int rank;
    };
    std::vector<Buffer> buffers;
    buffers.reserve(static_cast<std::size_t>(nprocs));
    const auto add = [&](const Part& p, int rank) {
        const auto begin = reinterpret_cast<std::uintptr_t>(p.data);
        if (p.count > 0) buffers.push_back({begin, begin + p.count * p.element_size, rank});
    };
    for (int r = 0; r < nprocs; ++r)
        if (const Part* p = parts_[static_cast<std::size_t>(r)]) add(*p, r);
    add(part, me.id);
    std::sort(buffers.begin(), buffers.end(), [](const Buffer& a, const Buffer& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.rank < b.rank;
    });
    // Sorted by start, a buffer overlaps a later one exactly when it ends
    // past that one's start; the furthest end so far stands for them all.
    std::vector<int> at_fault;
    std::string error;
    std::size_t reach = 0;  // the buffer that ends furthest so far
    for (std::size_t i = 1; i < buffers.size(); ++i) {
        if (buffers[i].begin < buffers[reach].end) {
            if (error.empty()) {
                const auto [low, high] = std::minmax(buffers[reach].rank, buffers[i].rank);
                const bool same = buffers[i].begin == buffers[reach].begin && buffers[i].end == buffers[reach].end;
                error = std::string(kind_name(part.kind)) + ": ranks " + std::to_string(low) + " and " +
                        std::to_string(high) + " passed " + (same ? "the same buffer" : "overlapping buffers") +
                        "; each rank needs its own, as each process has in torch";
            }
            at_fault.push_back(buffers[reach].rank);
            at_fault.push_back(buffers[i].rank);
        }
        if (buffers[i].end > buffers[reach].end) reach = i;
    }
    if (error.empty()) return true;
    if (std::find(at_fault.begin(), at_fault.end(), me.id) != at_fault.end()) {
        scheduler_.throw_or_keep(me, std::invalid_argument(error));
        return false;
    }
    std::sort(at_fault.begin(), at_fault.end());
    at_fault.erase(std::unique(at_fault.begin(), at_fault.end()), at_fault.end());
    scheduler_.fail_others(me, std::move(at_fault),
                           std::make_exception_ptr(std::invalid_argument(error)));
    return false;
}

bool Collectives::arrive(Rank& me, Part& part)
{
    const int nprocs = scheduler_.size();
    if (part.kind == Kind::broadcast && (part.root < 0 || part.root >= nprocs)) {
        scheduler_.throw_or_keep(me, std::invalid_argument("broadcast: src " + std::to_string(part.root) +
                                                           " is not a rank of this spawn (" + std::to_string(nprocs) +
                                                           " ranks)"));
        return false;
    }
    // A call unlike the open one waits, unregistered, for every rank to
    // come: only then is the odd one out known. Woken before the spawn
    // ends, the open call was taken back (judge) and this one is looked at
    // again.
    while (first_ != nullptr && !same_call(*first_, part)) {
        if (arrived_ + dissenting_ + 1 == nprocs) {
            if (!judge(me, part)) return false;
            continue;
        }
        dissent_[static_cast<std::size_t>(me.id)] = &part;
        ++dissenting_;
        me.wait = CollectiveWait{&part};
        if (!scheduler_.block(me)) return false;
    }
    if (dissenting_ > 0 && arrived_ + dissenting_ + 1 == nprocs && !judge(me, part)) return false;
    if (arrived_ + 1 == nprocs && !check_overlap(me, part)) return false;
    if (arrived_ == 0) {
        // Allocate before opening, so that a bad_alloc leaves nothing half done.
        auto store = part.make_store ? part.make_store(nprocs) : nullptr;
        unsigned long& of_kind = kind_counts_[part.kind];
        first_ = &part;
        step_ = ++steps_;
        ordinal_ = ++of_kind;
        store_ = std::move(store);
    }
    part.store = store_;
    parts_[static_cast<std::size_t>(me.id)] = &part;
    ++arrived_;
    me.wait = CollectiveWait{&part};
    return true;
}

// Every rank has come, not all with one call. The call most ranks made
// that do not unwind is taken as meant (on a tie, the call most ranks made,
// then the first one's) and the others are the error:
// thrown into the last rank when it alone differs, as if it had come with
// the others waiting, and otherwise the spawn's failure on the ranks that
// differ. Except where every rank that differs waits while it unwinds (a
// barrier in a destructor while its peers reduce): their exceptions are the
// root cause, so the error is only kept in each, as throw_or_keep does, and
// they go on unwinding. true: the last rank goes on with its call.
bool Collectives::judge(Rank& me, Part& part)
{
    struct Group {
        const Part* call;
        std::vector<int> ranks;
    };
    std::vector<Group> groups;
    for (int r = 0; r < scheduler_.size(); ++r) {
        const auto i = static_cast<std::size_t>(r);
        const Part* call = r == me.id ? &part : parts_[i] != nullptr ? parts_[i] : dissent_[i];
        if (call == nullptr) continue;  // cannot be: every rank has come
        auto group = std::find_if(groups.begin(), groups.end(),
                                  [&](const Group& g) { return same_call(*g.call, *call); });
        if (group == groups.end()) group = groups.insert(groups.end(), Group{call, {}});
        group->ranks.push_back(r);
    }
    // A rank that unwinds says nothing of the call meant: its exception is
    // what went wrong (a barrier in a destructor while its peers reduce).
    const auto counted = [&](const Group& g) {
        return std::count_if(g.ranks.begin(), g.ranks.end(), [&](int r) {
            return r == me.id ? std::uncaught_exceptions() == 0
                              : !ranks_[static_cast<std::size_t>(r)].blocked_unwinding;
        });
    };
    const auto meant = std::max_element(groups.begin(), groups.end(), [&](const Group& a, const Group& b) {
        if (counted(a) != counted(b)) return counted(a) < counted(b);
        if (a.ranks.size() != b.ranks.size()) return a.ranks.size() < b.ranks.size();
        return same_call(*b.call, *first_);
    });
    std::string error = "mismatched collectives at step " + std::to_string(step_) + ": " +
                        rank_list(meant->ranks) + " called " + describe_call(*meant->call);
    std::vector<int> odd;
    for (const Group& group : groups) {
        if (&group == &*meant) continue;
        error += ", " + rank_list(group.ranks) + " called " + describe_call(*group.call);
        odd.insert(odd.end(), group.ranks.begin(), group.ranks.end());
    }
    std::sort(odd.begin(), odd.end());
    const bool me_odd = std::binary_search(odd.begin(), odd.end(), me.id);
    const bool others_unwind = std::all_of(odd.begin(), odd.end(), [&](int r) {
        return r == me.id || ranks_[static_cast<std::size_t>(r)].blocked_unwinding;
    });
    if (!others_unwind) {
        if (odd == std::vector<int>{me.id}) {
            scheduler_.throw_or_keep(me, std::logic_error(error));
            return false;
        }
        scheduler_.fail_others(me, std::move(odd), std::make_exception_ptr(std::logic_error(error)));
        return false;
    }
    const auto kept = std::make_exception_ptr(std::logic_error(error));
    bool first_taken_back = false;
    for (const int r : odd) {
        if (r == me.id) continue;
        const auto i = static_cast<std::size_t>(r);
        if (parts_[i] != nullptr) {
            // All of the open call's ranks, since they made one call.
            parts_[i]->store.reset();
            parts_[i] = nullptr;
            --arrived_;
            first_taken_back = true;
        } else {
            dissent_[i] = nullptr;
            --dissenting_;
        }
        scheduler_.keep_and_wake(ranks_[i], kept);
    }
    if (first_taken_back) {
        // The calls that waited unlike it are looked at again, this one's
        // too, as if the open call had not been made.
        for (Rank& rank : ranks_)
            if (dissent_[static_cast<std::size_t>(rank.id)] != nullptr) scheduler_.wake(rank);
        --steps_;
        --kind_counts_[first_->kind];
        close();
    }
    if (me_odd) {
        scheduler_.throw_or_keep(me, std::logic_error(error));
        return false;
    }
    return true;
}

// The collective stays open for the other ranks, as if this one had not come:
// it may call again. Emptied, it no longer counts among the steps.
void Collectives::withdraw(Rank& me, Part& part) noexcept
{
    Part*& slot = parts_[static_cast<std::size_t>(me.id)];
    if (slot != &part) return;  // completed meanwhile, or cleared by an unwinding
    slot = nullptr;
    --arrived_;
    me.wait = std::monostate{};
    part.store.reset();
    if (arrived_ == 0) {
        --steps_;
        --kind_counts_[part.kind];
        assert(dissenting_ == 0);
        close();
        return;
    }
    if (first_ != &part) return;
    // Another rank's call becomes the one later arrivals must match: the
    // same call, as every registered part is.
    for (Part* p : parts_) {
        if (p != nullptr) {
            first_ = p;
            return;
        }
    }
}

void Collectives::complete_ready() noexcept
{
    if (first_ == nullptr || arrived_ != scheduler_.size()) return;
    if (first_->complete) first_->complete(parts_);
    for (Rank& rank : ranks_) scheduler_.wake(rank);
    close();
}

void Collectives::abandon() noexcept
{
    close();
}

void Collectives::close() noexcept
{
    std::fill(parts_.begin(), parts_.end(), nullptr);
    std::fill(dissent_.begin(), dissent_.end(), nullptr);
    first_ = nullptr;
    arrived_ = 0;
    dissenting_ = 0;
    store_.reset();
}

std::string Collectives::describe(const Part& part) const
{
    const std::string arrivals = std::to_string(arrived_ + dissenting_) + " of " + std::to_string(scheduler_.size()) +
                                 " arrived";
    if (first_ != nullptr && !same_call(*first_, part))
        return describe_call(part) + ", unlike the open " + describe_call(*first_) + " #" + std::to_string(ordinal_) +
               " (" + arrivals + ")";
    std::string arguments = describe_arguments(part);
    if (!arguments.empty()) arguments += "; ";
    return kind_name(part.kind) + (" #" + std::to_string(ordinal_)) + " (" + arguments + arrivals + ")";
}

}  // namespace pto::mp::detail
