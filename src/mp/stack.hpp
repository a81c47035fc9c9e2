// Rank stacks: anonymous mappings with a large PROT_NONE guard region at the
// low end, announced to valgrind, so that an overflow faults instead of
// corrupting the neighbouring rank.
#pragma once

#include "mp/result.hpp"

#include <cstddef>
#include <optional>
#include <span>

namespace pto::mp::detail {

// Below each stack. A single guard page lets any frame larger than a page
// jump over it into the next mapping, often another rank's stack (stack
// clash); a frame has to be larger than this to do so. It costs address space
// only: no memory, no extra mapping. On 64-bit targets it is 8 MiB, the
// default stack of a Linux main thread (ulimit -s), so code with a larger
// frame does not run natively either; valgrind's 128 GiB of address space still
// holds 10,000 such ranks. 32-bit targets have little address space to spare.
inline constexpr std::size_t guard_bytes = sizeof(void*) >= 8 ? std::size_t{8} << 20 : std::size_t{64} << 10;

// The guard region below a usable part of `usable_bytes`: guard_bytes, or a
// page more so that stack and guard together are an odd number of pages.
// Stacks a power of two of pages apart put every rank's top page in the
// same few sets of the TLB, which then missed on every switch between ranks
// (a yield among 1,000 ranks cost 2.5-3.5 times as much); an odd stride
// spreads them over all of its sets.
std::size_t guard_for(std::size_t usable_bytes) noexcept;

// One rank's stack: a slot of a mapping shared with the next ranks' (see
// StackCarver), given back with the mapping when its last stack goes.
class Stack {
public:
    Stack() = default;
    Stack(Stack&& other) noexcept;
    Stack& operator=(Stack&& other) noexcept;
    ~Stack();

    // The writable part, above the guard region.
    std::span<std::byte> usable() const noexcept;
    // The guard region: any access to it faults.
    std::span<std::byte> guard() const noexcept;

private:
    friend class StackCarver;
    struct Chunk;
    void release() noexcept;

    Chunk* chunk_ = nullptr;
    std::byte* low_ = nullptr;  // the guard region, then the usable part
    std::size_t guard_ = 0;
    std::size_t usable_ = 0;
    unsigned valgrind_id_ = 0;
};

// The stacks of one spawn, carved in order from mappings of up to
// chunk_stacks slots each: a mapping and an unmapping per chunk instead of
// per rank, which was most of the time to spawn 10,000 ranks.
class StackCarver {
public:
    static constexpr std::size_t chunk_stacks = 64;

    // `count` stacks of `usable_bytes` (as usable_stack_bytes returns it).
    StackCarver(std::size_t count, std::size_t usable_bytes) noexcept;
    StackCarver(const StackCarver&) = delete;
    StackCarver& operator=(const StackCarver&) = delete;
    ~StackCarver();  // a chunk no stack was taken from is unmapped

    Expected<Stack> next();

private:
    std::size_t remaining_;
    std::size_t usable_;
    std::size_t guard_;
    Stack::Chunk* chunk_ = nullptr;
    std::size_t taken_ = 0;  // from chunk_
};

std::size_t page_size() noexcept;

// `bytes` rounded up to whole pages; nothing when that, with the guard region
// below it, does not fit in a size_t.
std::optional<std::size_t> usable_stack_bytes(std::size_t bytes) noexcept;

// Fails, before anything is mapped, when `stacks` guarded stacks would not fit
// under vm.max_map_count next to the mappings the process already has.
Expected<void> check_map_budget(std::size_t stacks);

}  // namespace pto::mp::detail
