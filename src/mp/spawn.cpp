// The public edge of pto::mp: arguments are checked and outcomes become
// exceptions here; inside, failures are values.
#include "mp/messages.hpp"
#include "mp/world.hpp"

#include <pto/mp.hpp>

#include <chrono>
#include <stdexcept>
#include <system_error>
#include <utility>
#include <variant>

namespace pto::mp {

namespace {

constexpr std::size_t min_stack_bytes = 16 * 1024;

// A system error's message says what failed; std::system_error adds strerror.
[[noreturn]] void throw_error(const detail::Error& error)
{
    if (error.sys_errno != 0) throw std::system_error(error.sys_errno, std::generic_category(), error.message);
    throw std::runtime_error(error.message);
}

[[noreturn]] void throw_failure(const detail::Failed& failed)
{
    std::string ranks;
    SpawnError::Errors errors;
    for (const int rank : failed.ranks) {
        ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
        errors.emplace(rank, failed.error);
    }
    throw SpawnError("spawn failed on ranks [" + ranks + "]: rank " + std::to_string(failed.ranks.front()) +
                         " raised " + detail::describe_exception(failed.error) + failed.notes,
                     std::move(errors));
}

void finish(std::unique_ptr<detail::World>& world, const detail::Outcome& outcome)
{
    world.reset();  // unmap the stacks before anything is thrown
    if (const auto* failed = std::get_if<detail::Failed>(&outcome)) throw_failure(*failed);
    if (const auto* deadlock = std::get_if<detail::Deadlocked>(&outcome)) throw DeadlockError(deadlock->report, deadlock->errors);
    if (const auto* exit = std::get_if<detail::ThreadExit>(&outcome)) detail::continue_thread_exit(*exit);
}

void refuse_inside_rank(const char* what, const char* why)
{
    if (detail::Scheduler::in_rank())
        throw std::logic_error(std::string("pto::mp::") + what + " called inside a rank; " + why);
}

// The ranks' stacks hold what the compiler keeps of the thread, such as
// &errno and other thread-locals' addresses: they run on the thread that
// spawned them, or write into another's.
void refuse_other_thread(const detail::World& world, const char* what)
{
    if (!world.on_spawning_thread())
        throw std::logic_error(std::string("pto::mp::") + what +
                               " called on a thread other than the one that spawned it; a context is joined on its "
                               "spawning thread");
}

// now() + timeout, or the end of time where that would overflow.
detail::World::Clock::time_point deadline_after(std::chrono::nanoseconds timeout)
{
    using Clock = detail::World::Clock;
    const Clock::time_point now = Clock::now();
    const auto room = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::time_point::max() - now);
    if (timeout >= room) return Clock::time_point::max();
    return now + std::chrono::duration_cast<Clock::duration>(timeout);
}

}  // namespace

SpawnContext::SpawnContext(std::unique_ptr<detail::World> world) noexcept : world_(std::move(world)) {}
SpawnContext::SpawnContext(SpawnContext&&) noexcept = default;
SpawnContext& SpawnContext::operator=(SpawnContext&&) noexcept = default;
SpawnContext::~SpawnContext() = default;

void SpawnContext::join()
{
    refuse_inside_rank("SpawnContext::join()", "a context is joined outside its ranks, on its spawning thread");
    if (!world_) return;
    refuse_other_thread(*world_, "SpawnContext::join()");
    finish(world_, world_->run());
}

bool SpawnContext::join(std::chrono::nanoseconds timeout)
{
    refuse_inside_rank("SpawnContext::join(timeout)", "a context is joined outside its ranks, on its spawning thread");
    if (!world_) return true;
    refuse_other_thread(*world_, "SpawnContext::join(timeout)");
    const detail::Outcome outcome = world_->run(deadline_after(timeout));
    if (std::holds_alternative<detail::Paused>(outcome)) return false;
    finish(world_, outcome);
    return true;
}

SpawnContext spawn(std::function<void(int)> fn, int nprocs, SpawnOptions options)
{
    refuse_inside_rank("spawn()", "ranks cannot spawn ranks");
    if (!fn) throw std::invalid_argument("pto::mp::spawn: fn is empty");
    if (nprocs < 0) throw std::invalid_argument("pto::mp::spawn: nprocs is " + std::to_string(nprocs));
    if (options.stack_bytes < min_stack_bytes)
        throw std::invalid_argument("pto::mp::spawn: stack_bytes is " + std::to_string(options.stack_bytes) +
                                    ", below the minimum of 16 KiB");
    const auto usable = detail::usable_stack_bytes(options.stack_bytes);
    if (!usable)
        throw std::invalid_argument("pto::mp::spawn: stack_bytes is " + std::to_string(options.stack_bytes) +
                                    ", more than any address space holds");
    const auto kind = detail::choose_switch(options.context);
    if (!kind)
        throw std::invalid_argument("pto::mp::spawn: cannot use the assembly context switch: " +
                                    kind.error().message);
    auto world = detail::World::create(std::move(fn), nprocs, {*usable, *kind, {options.yield_only_rounds, options.yield_only_time}});
    if (!world) throw_error(world.error());
    SpawnContext context(std::move(*world));
    if (options.join) context.join();
    return context;
}

int get_rank()
{
    return detail::Scheduler::current("get_rank").id;
}

int get_world_size()
{
    return detail::Scheduler::current("get_world_size").world->size();
}

bool is_being_killed() noexcept
{
    return detail::Scheduler::being_killed();
}

void yield()
{
    detail::Rank& me = detail::Scheduler::current("yield");
    me.world->scheduler().yield(me);
}

void barrier()
{
    detail::Part part{.kind = detail::Kind::barrier};
    if (detail::arrive(part)) detail::await(part);
}

namespace detail {

bool arrive(Part& part)
{
    Rank& me = Scheduler::current(kind_name(part.kind));
    return me.world->scheduler().may_suspend(me, kind_name(part.kind)) && me.world->collectives().arrive(me, part);
}

bool await(Part& part)
{
    Rank& me = Scheduler::current("await");
    // Refused a suspension point inside the collective's own work where that
    // could not be thrown: it stops communicating.
    if (me.killed) {
        me.world->collectives().withdraw(me, part);
        return false;
    }
    return me.world->scheduler().block(me);
}

Work::Work(const Part& part) : rank_(Scheduler::current(kind_name(part.kind)))
{
    rank_.working = kind_name(part.kind);
}

Work::~Work()
{
    rank_.working = nullptr;
}

void withdraw(Part& part) noexcept
{
    // Only arrive() registers parts, and only inside a rank.
    if (!Scheduler::in_rank()) return;
    Rank& me = Scheduler::current("withdraw");
    me.world->collectives().withdraw(me, part);
}

void send(Message& message, int dst)
{
    Rank& me = Scheduler::current("send");
    me.world->mailbox().send(me, message, dst);
}

void recv(Message& message, int src)
{
    Rank& me = Scheduler::current("recv");
    me.world->mailbox().recv(me, message, src);
}

}  // namespace detail

}  // namespace pto::mp
