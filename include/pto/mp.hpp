// pto::mp — torch.multiprocessing.spawn semantics inside one process.
//
// spawn() runs fn(rank) for rank = 0..nprocs-1 as cooperative coroutines
// ("ranks") on the calling thread. Each rank has its own mmap'd stack with a
// guard region below it. Ranks run round-robin in rank order: a rank runs until it
// reaches a suspension point — yield(), barrier(), a collective, send()/recv() —
// and then the next rank of the round runs. Between rounds the spawning thread
// completes what the round made ready: matched send/recv pairs first, in the
// order they matched, then the collective every rank has arrived at. Nothing is
// preemptive and nothing is random, so a run is reproducible.
//
//     pto::mp::spawn([](int rank) {
//         std::vector<double> grad(4, rank + 1.0);
//         pto::mp::all_reduce(std::span(grad));   // every grad[i] == 10.0
//         auto names = pto::mp::all_gather(std::to_string(rank));
//         pto::mp::barrier();
//     }, 4);
//
// Failure follows torch and its reference emulation: the first rank whose body
// throws ends the spawn at once. Every other rank that has started is unwound on
// its own stack — its destructors run — by an exception that does not derive from
// std::exception; ranks that never started never run. A rank that swallows that
// exception with catch (...) gets it again at its next suspension point. Where a
// throw would end the program instead of reaching a handler — while the rank is
// already unwinding (std::uncaught_exceptions() > 0), or inside any noexcept
// function such as a destructor at a normal scope exit (`finally: barrier()`) —
// the suspension point returns at once without communicating (all_gather
// returns an empty vector), and is_being_killed() is true there. An error a
// suspension point would throw into its own rank there (a mismatched
// collective while the rank unwinds its exception) makes the rank stop
// communicating the same way, and fails the spawn when the rank ends unless
// the rank's own exception leaves it first. A killed rank that goes on for
// 100,000 more suspension points is left where it is, named in what(), its
// remaining destructors never run. spawn then throws SpawnError, whose
// errors() hold the root cause only: what escaped a rank while it was being
// unwound is not a root cause.
//
// Each rank has its own C++ exception state (the exception a `throw;` rethrows,
// std::uncaught_exceptions()) and its own floating-point control and exception
// flags (MXCSR and the x87 control and status words; FPCR and FPSR). A rank
// starts with the spawning thread's rounding mode and masks and no exception
// flag raised. The assembly context switch
// does not save the signal mask: ranks share the thread's.
//
// A stack overflow hits the guard region, which no frame of at most its size
// (8 MiB on 64-bit targets, 64 KiB on 32-bit ones) can jump over, and ends the
// process with SIGSEGV after a line on stderr naming the rank: "pto::mp: rank 3
// overflowed its 32768-byte stack (fault at 0x...)"; a larger frame that faults
// below the guard is named as having jumped it. Any other crash in a rank
// (abort(), std::terminate(), a bad pointer) is named by a line such as
// "pto::mp: SIGABRT while rank 2 ran". For that, SIGSEGV, SIGBUS, SIGILL,
// SIGFPE and SIGABRT go to a handler of pto::mp, installed at the first run and
// left in place, on an alternate signal stack the thread keeps from its first
// run to its end; after its line it passes each signal on to the handler it
// replaced. A rank that destroys
// the SpawnContext of its own spawn ends the process with SIGABRT and a line
// saying so.
// Each rank costs two kernel memory mappings, so vm.max_map_count (usually
// 65530) bounds the number of ranks near 30,000; spawn checks this before it
// starts. The fibers are announced to AddressSanitizer and, when built with the
// valgrind header, their stacks to valgrind.
//
// Where torch's ranks are processes, these share one: exit() in a rank ends the
// whole program at once (atexit handlers and static destructors run while the
// ranks are suspended; their destructors never do), where torch's join() would
// raise ProcessExitedException naming the rank. Throw instead. pthread_exit() in
// a rank ends the spawning thread: the rank's stack is unwound, then every other
// started rank's, then the spawner's own frames, as if the spawner had called it.
//
// Using get_rank() and the other in-rank functions outside a rank, or calling
// spawn() or SpawnContext::join() inside one, throws std::logic_error. One thread
// may hold several unjoined contexts; each has its own ranks and collectives.
// A context is joined on the thread that spawned it (elsewhere join() throws
// std::logic_error): ranks run on that thread, and errno and every other
// thread-local a rank uses are that thread's, shared by all its ranks.
#pragma once

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace pto::mp {

enum class ReduceOp { sum, product, min, max };

// How ranks switch. `ucontext` is swapcontext(3): portable, a system call per
// switch. `assembly` is a hand-written switch, on x86-64 and aarch64 only, a
// few nanoseconds. `automatic` is what the build's Meson option `context`
// says, by default the fastest that is safe here: assembly unless the thread
// runs with a CET shadow stack, which that switch does not follow.
enum class ContextKind { automatic, ucontext, assembly };

struct SpawnOptions {
    // Usable stack of each rank, rounded up to whole pages; a guard region of
    // 8 MiB of address space (64 KiB on 32-bit targets) comes below it. At least
    // 16 KiB. Memory is committed only as the rank touches it.
    std::size_t stack_bytes = 256 * 1024;
    // false: spawn returns without running any rank; SpawnContext::join() runs them.
    bool join = true;
    // assembly where this build or CPU has none, or where it is unsafe, makes
    // spawn throw std::invalid_argument.
    ContextKind context = ContextKind::automatic;
    // A rank that does nothing but yield() may be waiting for something only
    // another could do, one that is blocked, has returned, or spins too, and
    // would spin for ever. Once ranks have done nothing but yield for this
    // many rounds in a row and, after that, for yield_only_time, the spawn
    // fails with a DeadlockError naming the spinning ranks. 0 rounds never
    // gives up; 0 time stops at the rounds. A rank that yields through a
    // long computation while the others wait or also yield needs more.
    std::size_t yield_only_rounds = 1'000'000;
    std::chrono::nanoseconds yield_only_time = std::chrono::seconds(5);
};

// A spawn ended because a rank's body threw.
// what(): "spawn failed on ranks [1]: rank 1 raised <what() of its exception>".
class SpawnError : public std::runtime_error {
public:
    using Errors = std::map<int, std::exception_ptr>;  // rank -> what escaped it

    SpawnError(const std::string& message, Errors errors);

    // The root-cause ranks only (usually one). For a DeadlockError, what
    // left the ranks that were unwinding an exception when they blocked
    // (a `finally: barrier()` after a throw); usually empty.
    const Errors& errors() const noexcept { return *errors_; }

    // The failing rank, as torch's ProcessRaisedException.error_index: the
    // lowest rank of errors(), -1 where that is empty.
    int error_index() const noexcept { return errors_->empty() ? -1 : errors_->begin()->first; }

private:
    // Shared so that copying the exception cannot throw.
    std::shared_ptr<const Errors> errors_;
};

// A full round made no progress while ranks remained. what() names each blocked
// rank (ranges when many wait on the same thing) and what it waits on:
//     rank 2: barrier #5 (3 of 4 arrived)
// and then each rank that was unwinding an exception when it blocked:
//     rank 1 was unwinding the real error when it blocked
// Every rank was unwound before this was thrown.
class DeadlockError : public SpawnError {
public:
    explicit DeadlockError(const std::string& message);
    DeadlockError(const std::string& message, Errors unwinding);
};

namespace detail {
class World;
}

// The ranks of one spawn. Move-only. Destroying a context that was never joined
// discards its ranks: none of them runs.
class SpawnContext {
public:
    SpawnContext(SpawnContext&&) noexcept;
    SpawnContext& operator=(SpawnContext&&) noexcept;
    ~SpawnContext();

    // Runs the ranks to completion, like torch's ProcessContext.join() without a
    // timeout. Throws SpawnError or DeadlockError as spawn() does; once it has
    // returned or thrown, further calls return at once.
    void join();

    // Runs whole rounds until every rank has returned, true, or until a round
    // ends after `timeout` has passed, false (nanoseconds::max() never
    // passes, as torch's timeout=None); at least one round per call, so
    // that join(0s) in a loop makes progress. The ranks do not run between
    // calls: unlike torch's processes they live on this thread. Throws as
    // join() does; after the end, returns true at once.
    bool join(std::chrono::nanoseconds timeout);

private:
    explicit SpawnContext(std::unique_ptr<detail::World> world) noexcept;
    friend SpawnContext spawn(std::function<void(int)>, int, SpawnOptions);

    std::unique_ptr<detail::World> world_;
};

// Runs fn(rank) on nprocs ranks, each on its own copy of fn, made on the rank's
// stack when it starts (a copy that throws fails that rank), as each torch
// process unpickles its own: captures are not shared between ranks; what
// they point to or reference is. With options.join (the default) it returns after
// every rank has returned, or throws SpawnError / DeadlockError; otherwise it
// returns a context to join() later. Throws std::invalid_argument for an empty
// fn, a negative nprocs, a stack below 16 KiB or too large to round up with its
// guard region within a size_t, or an assembly switch that is missing or
// unsafe here (options.context), std::system_error or
// std::runtime_error when the stacks cannot be mapped (the message says why and
// names vm.max_map_count where it is the limit).
SpawnContext spawn(std::function<void(int rank)> fn, int nprocs, SpawnOptions options = {});

// torch's args=(...): each rank calls fn(rank, a...) on its own copy of args, as
// a separate process would receive its own (each rank's copy of this wrapper,
// see spawn above, holds them).
template <class Fn, class... Args>
    requires std::invocable<Fn&, int, Args&...> && std::copy_constructible<Fn> &&
             (std::copy_constructible<Args> && ...)
SpawnContext spawn(Fn fn, std::tuple<Args...> args, int nprocs, SpawnOptions options = {})
{
    return spawn(
        [fn = std::move(fn), args = std::move(args)](int rank) mutable {
            std::apply([&](Args&... a) { std::invoke(fn, rank, a...); }, args);
        },
        nprocs, options);
}

// --- Inside a rank ---------------------------------------------------------------

int get_rank();
int get_world_size();

// true in a rank whose spawn is ending (another rank failed, or it
// deadlocked) while it is unwound; false otherwise, and outside any rank. A
// destructor that communicates checks it to skip what it would do next: its
// suspension points return at once there without communicating.
bool is_being_killed() noexcept;

// Lets the other ranks run; this rank resumes in the next round.
void yield();

// Returns once every rank of the spawn has called barrier().
void barrier();

// Collectives take part in one sequence shared by all ranks: the k-th collective
// call of every rank must be the same call (kind, element type, size, op or
// src). A call that differs waits for every rank; then the ranks whose call
// differs from the most ranks' (on a tie, from the first to arrive) fail the
// spawn with a message naming them, thrown in the last rank when it alone
// differs.
// Buffers belong to their rank: all_reduce and broadcast throw
// std::invalid_argument in the last rank to arrive when two ranks' buffers
// overlap (torch code that shares one tensor between ranks, ported as is) and
// it is one of them; otherwise the spawn fails with that error for each rank
// at fault. A
// call that throws in its rank before the data moves (a throwing copy in
// all_gather) is withdrawn: it does not count in the sequence and may be
// called again.

namespace detail {

enum class Kind : unsigned char { barrier, all_reduce, broadcast, all_gather };

// One rank's part in a collective; lives on that rank's stack until it completes.
struct Part {
    Kind kind = Kind::barrier;
    const std::type_info* type = nullptr;
    std::size_t count = 0;
    std::size_t element_size = 0;
    ReduceOp op = ReduceOp::sum;
    int root = 0;
    void* data = nullptr;
    // Run once by the spawning thread when all ranks have arrived, with every
    // rank's part in rank order; must not throw.
    void (*complete)(std::span<Part* const> parts) noexcept = nullptr;
    // For results too general to be written by `complete`: the first rank to
    // arrive makes a store shared by all, each rank fills its slot on its own
    // stack (where a throwing copy fails that rank) and reads the whole after.
    std::shared_ptr<void> (*make_store)(int nprocs) = nullptr;
    std::shared_ptr<void> store{};
};

// One side of a send/recv pair.
struct Message {
    const std::type_info* type = nullptr;
    std::size_t count = 0;
    const void* in = nullptr;  // the sender's data
    void* out = nullptr;       // the receiver's buffer
    void (*copy)(const void* in, void* out, std::size_t count) noexcept = nullptr;
};

// false: this rank is being unwound and must return without communicating.
bool arrive(Part& part);
bool await(Part& part);
struct Rank;
// While it lives, the calling rank does a collective's own work (user code
// such as a copy, with its part registered) and must not suspend: every
// suspension point throws std::logic_error.
class Work {
public:
    explicit Work(const Part& part);
    Work(const Work&) = delete;
    Work& operator=(const Work&) = delete;
    ~Work();

private:
    Rank& rank_;
};
// Takes back a part this rank registered, when it fails before await().
void withdraw(Part& part) noexcept;
void send(Message& message, int dst);
void recv(Message& message, int src);

// Integers wrap on overflow, as torch's do: the arithmetic is unsigned, in at
// least unsigned int (a product of two unsigned shorts would be a signed int),
// and the conversion back is modular.
template <class T>
struct ArithmeticOf {
    using type = T;
};
template <std::integral T>
struct ArithmeticOf<T> {
    using type = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
};

template <class T>
T combine(T a, T b, ReduceOp op) noexcept
{
    using A = typename ArithmeticOf<T>::type;
    switch (op) {
    case ReduceOp::sum: return static_cast<T>(static_cast<A>(a) + static_cast<A>(b));
    case ReduceOp::product: return static_cast<T>(static_cast<A>(a) * static_cast<A>(b));
    case ReduceOp::min: return b < a ? b : a;
    case ReduceOp::max: return a < b ? b : a;
    }
    return a;
}

// Reduces in rank order, so floating-point results do not depend on who
// arrived first.
template <class T>
void reduce_parts(std::span<Part* const> parts) noexcept
{
    T* acc = static_cast<T*>(parts[0]->data);
    const std::size_t n = parts[0]->count;
    for (std::size_t r = 1; r < parts.size(); ++r) {
        const T* in = static_cast<const T*>(parts[r]->data);
        for (std::size_t i = 0; i < n; ++i) acc[i] = combine(acc[i], in[i], parts[0]->op);
    }
    for (std::size_t r = 1; r < parts.size(); ++r)
        std::copy_n(acc, n, static_cast<T*>(parts[r]->data));
}

template <class T>
void broadcast_parts(std::span<Part* const> parts) noexcept
{
    const Part& src = *parts[static_cast<std::size_t>(parts[0]->root)];
    for (Part* p : parts)
        if (p != &src) std::copy_n(static_cast<const T*>(src.data), src.count, static_cast<T*>(p->data));
}

template <class T>
void copy_elements(const void* in, void* out, std::size_t count) noexcept
{
    std::copy_n(static_cast<const T*>(in), count, static_cast<T*>(out));
}

template <class T>
concept Reducible = std::is_arithmetic_v<T> && !std::is_same_v<T, bool> && !std::is_const_v<T>;

template <class T>
concept Transferable = std::is_nothrow_copy_assignable_v<T>;

}  // namespace detail

// Every rank's data becomes the element-wise op over all ranks' data.
template <detail::Reducible T, std::size_t Extent = std::dynamic_extent>
void all_reduce(std::span<T, Extent> data, ReduceOp op = ReduceOp::sum)
{
    detail::Part part{.kind = detail::Kind::all_reduce,
                      .type = &typeid(T),
                      .count = data.size(),
                      .element_size = sizeof(T),
                      .op = op,
                      .data = data.data(),
                      .complete = &detail::reduce_parts<T>};
    if (detail::arrive(part)) detail::await(part);
}

// Every rank's data becomes rank src's.
template <class T, std::size_t Extent = std::dynamic_extent>
    requires detail::Transferable<T>
void broadcast(std::span<T, Extent> data, int src)
{
    detail::Part part{.kind = detail::Kind::broadcast,
                      .type = &typeid(T),
                      .count = data.size(),
                      .element_size = sizeof(T),
                      .root = src,
                      .data = data.data(),
                      .complete = &detail::broadcast_parts<T>};
    if (detail::arrive(part)) detail::await(part);
}

// Every rank's value, indexed by rank.
template <std::copy_constructible T>
std::vector<T> all_gather(const T& value)
{
    using Slots = std::vector<std::optional<T>>;
    detail::Part part{.kind = detail::Kind::all_gather,
                      .type = &typeid(T),
                      .count = 1,
                      .make_store = [](int nprocs) -> std::shared_ptr<void> {
                          return std::make_shared<Slots>(static_cast<std::size_t>(nprocs));
                      }};
    if (!detail::arrive(part)) return {};
    Slots& slots = *static_cast<Slots*>(part.store.get());
    try {
        const detail::Work work(part);
        slots[static_cast<std::size_t>(get_rank())].emplace(value);
    } catch (...) {
        detail::withdraw(part);
        throw;
    }
    if (!detail::await(part)) return {};
    std::vector<T> gathered;
    gathered.reserve(slots.size());
    for (const auto& slot : slots) gathered.push_back(*slot);
    return gathered;
}

// Point to point, blocking until the matching recv()/send() has copied the data.
// Pairs match in call order per (sender, receiver); element type and count must
// agree, or the spawn fails naming both ranks.
template <class T, std::size_t Extent = std::dynamic_extent>
    requires detail::Transferable<std::remove_const_t<T>>
void send(std::span<T, Extent> data, int dst)
{
    detail::Message message{.type = &typeid(std::remove_const_t<T>), .count = data.size(), .in = data.data()};
    detail::send(message, dst);
}

template <class T, std::size_t Extent = std::dynamic_extent>
    requires detail::Transferable<T>
void recv(std::span<T, Extent> data, int src)
{
    detail::Message message{.type = &typeid(T),
                            .count = data.size(),
                            .out = data.data(),
                            .copy = &detail::copy_elements<T>};
    detail::recv(message, src);
}

}  // namespace pto::mp
