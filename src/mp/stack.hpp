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

// Stacks spaced alike put every rank's top page in the same few sets of
// the TLB, which then misses on every switch between ranks (with 8 MiB
// guards a yield among 1,000 ranks cost 2.5-3.5 times as much): each guard
// is longer by a different number of pages, up to this many. Not on 32-bit
// targets, whose address space has no room for it.
inline constexpr std::size_t stack_colours = sizeof(void*) >= 8 ? 64 : 1;

class Stack {
public:
    Stack() = default;
    Stack(Stack&& other) noexcept;
    Stack& operator=(Stack&& other) noexcept;
    ~Stack();

    // usable_bytes as usable_stack_bytes returns it. `colour`: the guard
    // region is that many pages (modulo stack_colours) longer than
    // guard_bytes.
    static Expected<Stack> map(std::size_t usable_bytes, std::size_t colour);

    // The writable part, above the guard region.
    std::span<std::byte> usable() const noexcept;
    // The guard region: any access to it faults.
    std::span<std::byte> guard() const noexcept;

private:
    void release() noexcept;

    std::byte* base_ = nullptr;  // the guard region
    std::size_t guard_ = 0;      // its length
    std::size_t mapped_ = 0;     // guard region included
    unsigned valgrind_id_ = 0;
};

std::size_t page_size() noexcept;

// `bytes` rounded up to whole pages; nothing when that, with the guard region
// on top, does not fit in a size_t.
std::optional<std::size_t> usable_stack_bytes(std::size_t bytes) noexcept;

// Fails, before anything is mapped, when `stacks` guarded stacks would not fit
// under vm.max_map_count next to the mappings the process already has.
Expected<void> check_map_budget(std::size_t stacks);

}  // namespace pto::mp::detail
