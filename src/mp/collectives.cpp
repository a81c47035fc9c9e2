// Collectives and send/recv: a rank checks its call against its peers' and
// registers it on its own stack, where a mismatch fails that rank; the
// spawning thread then moves the data between rounds, in rank order.
#include "mp/messages.hpp"
#include "mp/world.hpp"

#include <algorithm>
#include <cstdint>
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

// Buffers shared between ranks would make a reduction read what it already
// wrote: in torch each process has its own. Checked when the last rank
// arrives, before it registers, so that a caught error leaves nothing behind.
void World::check_overlap(const Rank& me, const Part& part) const
{
    if (part.data == nullptr || nprocs_ < 2) return;
    struct Buffer {
        std::uintptr_t begin, end;
        int rank;
    };
    std::vector<Buffer> buffers;
    buffers.reserve(static_cast<std::size_t>(nprocs_));
    const auto add = [&](const Part& p, int rank) {
        const auto begin = reinterpret_cast<std::uintptr_t>(p.data);
        if (p.count > 0) buffers.push_back({begin, begin + p.count * p.element_size, rank});
    };
    for (int r = 0; r < nprocs_; ++r)
        if (const Part* p = collective_.parts[static_cast<std::size_t>(r)]) add(*p, r);
    add(part, me.id);
    std::sort(buffers.begin(), buffers.end(), [](const Buffer& a, const Buffer& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.rank < b.rank;
    });
    for (std::size_t i = 1; i < buffers.size(); ++i) {
        if (buffers[i].begin >= buffers[i - 1].end) continue;
        const auto [low, high] = std::minmax(buffers[i - 1].rank, buffers[i].rank);
        const bool same = buffers[i].begin == buffers[i - 1].begin && buffers[i].end == buffers[i - 1].end;
        throw std::invalid_argument(std::string(kind_name(part.kind)) + ": ranks " + std::to_string(low) + " and " +
                                    std::to_string(high) + " passed " +
                                    (same ? "the same buffer" : "overlapping buffers") +
                                    "; each rank needs its own, as each process has in torch");
    }
}

bool World::arrive(Rank& me, Part& part)
{
    if (!may_suspend(me)) return false;
    if (part.kind == Kind::broadcast && (part.root < 0 || part.root >= nprocs_))
        throw std::invalid_argument("broadcast: src " + std::to_string(part.root) + " is not a rank of this spawn (" +
                                    std::to_string(nprocs_) + " ranks)");
    Collective& c = collective_;
    if (c.arrived + 1 == nprocs_) check_overlap(me, part);
    if (c.arrived == 0) {
        // Allocate before opening, so that a bad_alloc leaves nothing half done.
        auto store = part.make_store ? part.make_store(nprocs_) : nullptr;
        c.first = &part;
        c.first_rank = me.id;
        c.step = ++steps_;
        c.ordinal = ++kind_counts_[static_cast<std::size_t>(part.kind)];
        c.store = std::move(store);
    } else if (!same_call(*c.first, part)) {
        std::vector<int> matching;
        for (int r = 0; r < nprocs_; ++r)
            if (c.parts[static_cast<std::size_t>(r)] != nullptr) matching.push_back(r);
        throw std::logic_error("mismatched collectives at step " + std::to_string(c.step) + ": " +
                               rank_list(matching) + " called " + describe_call(*c.first) + ", rank " +
                               std::to_string(me.id) + " called " + describe_call(part));
    }
    part.store = c.store;
    c.parts[static_cast<std::size_t>(me.id)] = &part;
    ++c.arrived;
    me.wait = Rank::Wait::collective;
    me.part = &part;
    return true;
}

// The collective stays open for the other ranks, as if this one had not come:
// it may call again. Emptied, it no longer counts among the steps.
void World::withdraw(Rank& me, Part& part) noexcept
{
    Collective& c = collective_;
    Part*& slot = c.parts[static_cast<std::size_t>(me.id)];
    if (slot != &part) return;  // completed meanwhile, or cleared by an unwinding
    slot = nullptr;
    --c.arrived;
    me.wait = Rank::Wait::nothing;
    me.part = nullptr;
    part.store.reset();
    if (c.arrived == 0) {
        --steps_;
        --kind_counts_[static_cast<std::size_t>(part.kind)];
        c.first = nullptr;
        c.first_rank = -1;
        c.store.reset();
        return;
    }
    if (c.first != &part) return;
    // Another rank's call becomes the one later arrivals must match.
    for (int r = 0; r < nprocs_; ++r) {
        if (Part* p = c.parts[static_cast<std::size_t>(r)]) {
            c.first = p;
            c.first_rank = r;
            return;
        }
    }
}

bool World::await(Rank& me)
{
    return block(me);
}

void World::complete_collective() noexcept
{
    Collective& c = collective_;
    if (c.first->complete) c.first->complete(c.parts);
    for (Rank& rank : ranks_) wake(rank);
    std::fill(c.parts.begin(), c.parts.end(), nullptr);
    c.first = nullptr;
    c.arrived = 0;
    c.store.reset();
}

void World::check_peer(const Rank& me, int peer, const char* call) const
{
    if (peer < 0 || peer >= nprocs_)
        throw std::invalid_argument(std::string(call) + ": rank " + std::to_string(peer) +
                                    " is not a rank of this spawn (" + std::to_string(nprocs_) + " ranks)");
    if (peer == me.id)
        throw std::invalid_argument(std::string(call) + ": rank " + std::to_string(peer) + " names itself");
}

void World::send(Rank& me, Message& message, int dst)
{
    check_peer(me, dst, "send");
    if (!may_suspend(me)) return;
    Rank& receiver = ranks_[static_cast<std::size_t>(dst)];
    if (receiver.state == Rank::State::blocked && receiver.wait == Rank::Wait::recv && receiver.peer == me.id) {
        const Message& wanted = *receiver.message;
        if (*wanted.type != *message.type || wanted.count != message.count)
            throw std::logic_error("mismatched send/recv: rank " + std::to_string(me.id) + " sends " +
                                   describe_elements(message.count, *message.type) + " to rank " +
                                   std::to_string(dst) + ", which receives " +
                                   describe_elements(wanted.count, *wanted.type));
        matches_.emplace_back(&me, &receiver);
    }
    me.wait = Rank::Wait::send;
    me.peer = dst;
    me.message = &message;
    block(me);
}

void World::recv(Rank& me, Message& message, int src)
{
    check_peer(me, src, "recv");
    if (!may_suspend(me)) return;
    Rank& sender = ranks_[static_cast<std::size_t>(src)];
    if (sender.state == Rank::State::blocked && sender.wait == Rank::Wait::send && sender.peer == me.id) {
        const Message& offered = *sender.message;
        if (*offered.type != *message.type || offered.count != message.count)
            throw std::logic_error("mismatched send/recv: rank " + std::to_string(me.id) + " receives " +
                                   describe_elements(message.count, *message.type) + " from rank " +
                                   std::to_string(src) + ", which sends " +
                                   describe_elements(offered.count, *offered.type));
        matches_.emplace_back(&sender, &me);
    }
    me.wait = Rank::Wait::recv;
    me.peer = src;
    me.message = &message;
    block(me);
}

}  // namespace pto::mp::detail
