// libFuzzer entry point; the checks live in fuzz_checks.cpp.
#include <cstddef>
#include <cstdint>

#include "fuzz_checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    pto::fuzz::check_step_stream({reinterpret_cast<const char*>(data), size});
    return 0;
}
