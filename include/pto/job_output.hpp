// Everything one job wrote to its stdout+stderr pipe, byte-exact, in bounded
// memory: past a limit the bytes go to an unlinked temporary file in $TMPDIR
// (or /tmp), so a job may print gigabytes without growing the runner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <pto/error.hpp>

namespace pto {

class JobOutput {
public:
    static constexpr std::size_t default_memory_limit = 1 << 20;

    explicit JobOutput(std::size_t memory_limit = default_memory_limit) : memory_limit_(memory_limit) {}
    JobOutput(JobOutput&& o) noexcept;
    JobOutput& operator=(JobOutput&& o) noexcept;
    JobOutput(const JobOutput&) = delete;
    JobOutput& operator=(const JobOutput&) = delete;
    ~JobOutput();

    // Keeps the bytes. If the temporary file cannot take them (a full disk),
    // they are counted in dropped() and error() says why; the run goes on.
    void append(std::string_view bytes);

    std::uint64_t size() const { return spilled_ ? file_size_ : memory_.size(); }  // bytes kept
    std::uint64_t dropped() const { return dropped_; }
    const std::optional<Error>& error() const { return error_; }
    bool spilled() const { return spilled_; }

    // Hands the kept bytes to `sink` in order, in chunks of at most 64 KiB
    // once spilled. A sink that returns false stops the walk.
    Expected<void> for_each_chunk(const std::function<bool(std::string_view)>& sink) const;

    // All kept bytes as one string; for small outputs and tests.
    Expected<std::string> str() const;

    // The last `max_bytes` bytes written (at most 64 KiB are remembered).
    std::string_view tail(std::size_t max_bytes) const;

    // The last line, complete or not, without its newline (status reports).
    std::string_view last_line() const;

private:
    static constexpr std::size_t tail_keep = 64 * 1024;

    void spill();
    void write_file(std::string_view bytes);
    void remember_tail(std::string_view bytes);
    void close_file();

    std::size_t memory_limit_;
    std::string memory_;
    std::string tail_;
    int fd_ = -1;
    bool spilled_ = false;
    std::uint64_t file_size_ = 0;
    std::uint64_t dropped_ = 0;
    std::optional<Error> error_;
};

}  // namespace pto
