// Rank stacks: anonymous mappings with a PROT_NONE guard page at the low end,
// announced to valgrind, so that an overflow faults instead of corrupting the
// neighbouring rank.
#pragma once

#include <pto/error.hpp>

#include <cstddef>
#include <span>

namespace pto::mp::detail {

class Stack {
public:
    Stack() = default;
    Stack(Stack&& other) noexcept;
    Stack& operator=(Stack&& other) noexcept;
    ~Stack();

    // usable_bytes must be a multiple of the page size (see round_to_pages).
    static Expected<Stack> map(std::size_t usable_bytes);

    // The writable part, above the guard page.
    std::span<std::byte> usable() const noexcept;

private:
    void release() noexcept;

    std::byte* base_ = nullptr;  // the guard page
    std::size_t mapped_ = 0;     // guard page included
    unsigned valgrind_id_ = 0;
};

std::size_t page_size() noexcept;
std::size_t round_to_pages(std::size_t bytes) noexcept;

// Fails, before anything is mapped, when `stacks` guarded stacks would not fit
// under vm.max_map_count next to the mappings the process already has.
Expected<void> check_map_budget(std::size_t stacks);

}  // namespace pto::mp::detail
