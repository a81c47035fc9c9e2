#include "mp/stack.hpp"

#include "mp/annotations.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <utility>

namespace pto::mp::detail {

namespace {

// The guard region and the usable part have different protections, so each
// stack is two mappings.
constexpr std::size_t maps_per_stack = 2;

// Left for the rest of the process (malloc arenas, libraries loaded later).
constexpr std::size_t spare_maps = 1024;

std::string kib(std::size_t bytes)
{
    return std::to_string(bytes / 1024) + " KiB";
}

// -1 when the file is unreadable, as in a container without /proc.
long read_number(const char* path)
{
    std::ifstream in(path);
    long value = -1;
    if (!(in >> value)) return -1;
    return value;
}

long count_lines(const char* path)
{
    std::ifstream in(path);
    if (!in) return -1;
    return std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n');
}

// Why mmap or mprotect of a stack failed with ENOMEM: too many mappings, or
// (mmap) no address space left, or (mprotect) more memory than the kernel
// will commit. Only the first is vm.max_map_count's doing.
Error map_error(const char* call, std::size_t usable_bytes, int err)
{
    const std::string what = std::string(call) + " of a " + kib(usable_bytes) + " rank stack";
    const long limit = read_number("/proc/sys/vm/max_map_count");
    const long in_use = count_lines("/proc/self/maps");
    if (limit > 0 && in_use >= 0 && static_cast<std::size_t>(in_use) + maps_per_stack + spare_maps / 8 >=
                                        static_cast<std::size_t>(limit))
        return Error{what + " (each takes 2 of the vm.max_map_count mappings; the process has " +
                         std::to_string(in_use) + " of " + std::to_string(limit) + ")",
                     err};
    if (std::string(call) == "mprotect")
        return Error{what + ": more memory than the kernel will commit (vm.overcommit_memory, CommitLimit in "
                            "/proc/meminfo)",
                     err};
    return Error{what + " and its " + kib(guard_bytes) + " guard region: no room in the address space", err};
}

}  // namespace

std::size_t page_size() noexcept
{
    static const std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return size;
}

std::optional<std::size_t> usable_stack_bytes(std::size_t bytes) noexcept
{
    const std::size_t page = page_size();
    const std::size_t pages = bytes / page + (bytes % page != 0 ? 1 : 0);
    // With its guard region, a page more at most.
    if (pages > (SIZE_MAX - guard_bytes) / page - 1) return std::nullopt;
    return pages * page;
}

Expected<void> check_map_budget(std::size_t stacks)
{
    const long limit = read_number("/proc/sys/vm/max_map_count");
    if (limit <= 0) return {};  // unknown: mmap's own failure will name the limit
    // In 64 bits: on a 32-bit size_t, INT_MAX ranks' mappings wrapped to a
    // number small enough to pass, and the ranks' vector threw length_error.
    const std::uint64_t need = std::uint64_t{stacks} * maps_per_stack;
    const auto max = static_cast<std::uint64_t>(limit);
    // Reading /proc/self/maps costs more than a small spawn; only a spawn that
    // takes a good share of the limit can be the one that crosses it.
    if (need <= max / 4) return {};
    const long counted = count_lines("/proc/self/maps");
    const std::uint64_t in_use = counted < 0 ? 0 : static_cast<std::uint64_t>(counted);
    if (in_use + need + spare_maps <= max) return {};
    // The sysctl is an int: a suggestion past INT_MAX could not be set.
    constexpr auto settable = static_cast<std::uint64_t>(std::numeric_limits<int>::max());
    if (in_use + need + spare_maps > settable)
        return fail("cannot spawn " + std::to_string(stacks) + " ranks: their guarded stacks need " +
                    std::to_string(need) + " memory mappings, more than vm.max_map_count can be (" +
                    std::to_string(settable) + "); spawn fewer ranks");
    return fail("cannot spawn " + std::to_string(stacks) + " ranks: their guarded stacks need " +
                std::to_string(need) + " memory mappings, the process already has " +
                std::to_string(in_use) + " and vm.max_map_count is " + std::to_string(max) +
                "; raise it (sysctl -w vm.max_map_count=" + std::to_string(in_use + need + spare_maps) +
                ") or spawn fewer ranks");
}

std::size_t guard_for(std::size_t usable_bytes) noexcept
{
    const std::size_t page = page_size();
    return (guard_bytes + usable_bytes) / page % 2 == 1 ? guard_bytes : guard_bytes + page;
}

struct Stack::Chunk {
    std::byte* base;
    std::size_t size;
    std::size_t live = 0;  // stacks of it not yet released

    // The mapping goes, and `chunk` with it.
    static void drop(Chunk* chunk) noexcept
    {
        // Unmapping exactly what mmap returned splits nothing, so neither
        // EINVAL nor vm.max_map_count's ENOMEM can happen.
        [[maybe_unused]] const int rc = munmap(chunk->base, chunk->size);
        assert(rc == 0);
        delete chunk;
    }
};

StackCarver::StackCarver(std::size_t count, std::size_t usable_bytes) noexcept
    : remaining_(count), usable_(usable_bytes), guard_(guard_for(usable_bytes))
{
}

StackCarver::~StackCarver()
{
    if (chunk_ != nullptr && chunk_->live == 0)
        Stack::Chunk::drop(chunk_);
}

Expected<Stack> StackCarver::next()
{
    const std::size_t slot = guard_ + usable_;
    if (chunk_ == nullptr || taken_ == StackCarver::chunk_stacks) {
        if (chunk_ != nullptr && chunk_->live == 0)
            Stack::Chunk::drop(chunk_);
        chunk_ = nullptr;
        // As many as fit a size_t too, one at least (usable_stack_bytes).
        const std::size_t stacks = std::min({remaining_, StackCarver::chunk_stacks, SIZE_MAX / slot});
        // Mapped inaccessible first: such a mapping is not charged against
        // the commit limit, so the guard regions cost no commit even with
        // vm.overcommit_memory=2; only the usable parts are made writable.
        void* p = mmap(nullptr, stacks * slot, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (p == MAP_FAILED) return tl::unexpected(map_error("mmap", usable_, errno));
        chunk_ = new Stack::Chunk{static_cast<std::byte*>(p), stacks * slot};
        taken_ = 0;
    }
    std::byte* low = chunk_->base + taken_ * slot;
    if (mprotect(low + guard_, usable_, PROT_READ | PROT_WRITE) != 0)
        // ENOMEM: splitting the mapping crossed vm.max_map_count, or the
        // commit limit refused the usable part.
        return tl::unexpected(map_error("mprotect", usable_, errno));
    ++taken_;
    --remaining_;
    ++chunk_->live;
    Stack stack;
    stack.chunk_ = chunk_;
    stack.low_ = low;
    stack.guard_ = guard_;
    stack.usable_ = usable_;
    const auto usable = stack.usable();
    stack.valgrind_id_ = valgrind_register_stack(usable.data(), usable.data() + usable.size());
    return stack;
}

Stack::Stack(Stack&& other) noexcept
    : chunk_(std::exchange(other.chunk_, nullptr)),
      low_(std::exchange(other.low_, nullptr)),
      guard_(std::exchange(other.guard_, 0)),
      usable_(std::exchange(other.usable_, 0)),
      valgrind_id_(std::exchange(other.valgrind_id_, 0))
{
}

Stack& Stack::operator=(Stack&& other) noexcept
{
    if (this != &other) {
        release();
        chunk_ = std::exchange(other.chunk_, nullptr);
        low_ = std::exchange(other.low_, nullptr);
        guard_ = std::exchange(other.guard_, 0);
        usable_ = std::exchange(other.usable_, 0);
        valgrind_id_ = std::exchange(other.valgrind_id_, 0);
    }
    return *this;
}

Stack::~Stack()
{
    release();
}

std::span<std::byte> Stack::usable() const noexcept
{
    if (low_ == nullptr) return {};
    return {low_ + guard_, usable_};
}

std::span<std::byte> Stack::guard() const noexcept
{
    if (low_ == nullptr) return {};
    return {low_, guard_};
}

void Stack::release() noexcept
{
    if (low_ == nullptr) return;
    const auto usable = this->usable();
    valgrind_deregister_stack(valgrind_id_);
    asan_unpoison(usable.data(), usable.size());
    low_ = nullptr;
    // The chunk goes with its last stack (a carver still cutting from it
    // holds it too: its stacks are all released only after it is done).
    if (--chunk_->live == 0)
        Chunk::drop(chunk_);
    chunk_ = nullptr;
}

}  // namespace pto::mp::detail
