#include "mp/mailbox.hpp"

#include "mp/messages.hpp"

#include <stdexcept>
#include <string>

namespace pto::mp::detail {

Mailbox::Mailbox(Scheduler& scheduler, std::span<Rank> ranks) : scheduler_(scheduler), ranks_(ranks)
{
    // Reserved once: a match is recorded between two switches, where a
    // bad_alloc could not be reported to anyone.
    matches_.reserve(ranks.size() / 2);
}

bool Mailbox::check_peer(Rank& me, int peer, const char* call)
{
    const int nprocs = scheduler_.size();
    if (peer < 0 || peer >= nprocs) {
        scheduler_.throw_or_keep(me, std::invalid_argument(std::string(call) + ": rank " + std::to_string(peer) +
                                                           " is not a rank of this spawn (" +
                                                           std::to_string(nprocs) + " ranks)"));
        return false;
    }
    if (peer == me.id) {
        scheduler_.throw_or_keep(me, std::invalid_argument(std::string(call) + ": rank " + std::to_string(peer) +
                                                           " names itself"));
        return false;
    }
    return true;
}

void Mailbox::send(Rank& me, Message& message, int dst)
{
    if (!check_peer(me, dst, "send") || !scheduler_.may_suspend(me, "send")) return;
    Rank& receiver = ranks_[static_cast<std::size_t>(dst)];
    const auto* wanted = std::get_if<RecvWait>(&receiver.wait);
    if (receiver.state == Rank::State::blocked && wanted != nullptr && wanted->peer == me.id) {
        const Message& in = *wanted->message;
        if (*in.type != *message.type || in.count != message.count) {
            scheduler_.throw_or_keep(me, std::logic_error("mismatched send/recv: rank " + std::to_string(me.id) +
                                                          " sends " + describe_elements(message.count, *message.type) +
                                                          " to rank " + std::to_string(dst) + ", which receives " +
                                                          describe_elements(in.count, *in.type)));
            return;
        }
        matches_.emplace_back(&me, &receiver);
    }
    me.wait = SendWait{dst, &message};
    scheduler_.block(me);
}

void Mailbox::recv(Rank& me, Message& message, int src)
{
    if (!check_peer(me, src, "recv") || !scheduler_.may_suspend(me, "recv")) return;
    Rank& sender = ranks_[static_cast<std::size_t>(src)];
    const auto* offered = std::get_if<SendWait>(&sender.wait);
    if (sender.state == Rank::State::blocked && offered != nullptr && offered->peer == me.id) {
        const Message& out = *offered->message;
        if (*out.type != *message.type || out.count != message.count) {
            scheduler_.throw_or_keep(me, std::logic_error("mismatched send/recv: rank " + std::to_string(me.id) +
                                                          " receives " +
                                                          describe_elements(message.count, *message.type) +
                                                          " from rank " + std::to_string(src) + ", which sends " +
                                                          describe_elements(out.count, *out.type)));
            return;
        }
        matches_.emplace_back(&sender, &me);
    }
    me.wait = RecvWait{src, &message};
    scheduler_.block(me);
}

void Mailbox::complete_ready() noexcept
{
    for (auto [sender, receiver] : matches_) {
        const Message& in = *std::get<SendWait>(sender->wait).message;
        Message& out = *std::get<RecvWait>(receiver->wait).message;
        out.copy(in.in, out.out, out.count);
        scheduler_.wake(*sender);
        scheduler_.wake(*receiver);
    }
    matches_.clear();
}

void Mailbox::abandon() noexcept
{
    matches_.clear();
}

std::string Mailbox::peer_note(int peer) const
{
    return ranks_[static_cast<std::size_t>(peer)].state == Rank::State::finished
               ? " (rank " + std::to_string(peer) + " has returned)"
               : std::string();
}

std::string Mailbox::describe(const SendWait& wait) const
{
    return "send(" + describe_elements(wait.message->count, *wait.message->type) + ") to rank " +
           std::to_string(wait.peer) + peer_note(wait.peer);
}

std::string Mailbox::describe(const RecvWait& wait) const
{
    return "recv(" + describe_elements(wait.message->count, *wait.message->type) + ") from rank " +
           std::to_string(wait.peer) + peer_note(wait.peer);
}

}  // namespace pto::mp::detail
