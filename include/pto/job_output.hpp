// Everything one job wrote to its stdout+stderr pipe, byte-exact.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <pto/error.hpp>

namespace pto {

class JobOutput {
public:
    void append(std::string_view bytes);

    std::uint64_t size() const { return bytes_.size(); }

    // Hands the bytes to `sink` in order, in one or more chunks. A sink that
    // returns false stops the walk (its own error is the caller's to report).
    Expected<void> for_each_chunk(const std::function<bool(std::string_view)>& sink) const;

    // The whole output as one string; for small outputs and tests.
    std::string str() const { return bytes_; }

    // The last complete or partial line, without its newline (status reports).
    std::string_view last_line() const;

private:
    std::string bytes_;
};

}  // namespace pto
