// Standard output or error as the run's loop sees it: writes never block.
// What the reader does not take at once waits for POLLOUT in the run's one
// poll (a Sink is a PollClient), in bounded memory and beyond that in a
// backlog file, so a pager, a paused terminal or a stalled tee never delays
// a signal, a time limit, a reap or the next start (MPD's BufferedSocket).
// A reader that leaves is seen as EPIPE when the process ignores SIGPIPE,
// as pto-par does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <pto/error.hpp>
#include <pto/job_output.hpp>
#include <pto/scheduler.hpp>

#include "common/unique_fd.hpp"

namespace pto::output {

class Sink final : public PollClient {
public:
    static constexpr std::size_t default_memory_limit = 1 << 20;

    // `fd` stays open and unchanged (see the .cpp for how); `name` is what
    // messages call it ("standard output"). Pending bytes past
    // `memory_limit` wait in a backlog file made in `place` now.
    static Expected<std::unique_ptr<Sink>> open(int fd, std::string name, const SpillPlace& place,
                                                std::size_t memory_limit = default_memory_limit);
    ~Sink() override;
    Sink(const Sink&) = delete;
    Sink& operator=(const Sink&) = delete;

    // Written at once when nothing is pending, else queued behind it.
    void write(std::string_view bytes);
    // A job's whole output; its spilled part goes in the kernel, to the
    // reader or into the backlog, never through this process's memory.
    void write(const JobOutput& output);

    // Where bytes may be moved to in the kernel (splice, tee) now, to come
    // out right after what was written: when nothing is pending, to a pipe,
    // a regular file not opened O_APPEND (splice refuses it) or /dev/null,
    // and not on a terminal shared with a progress line. fd < 0: not now.
    JobOutput::Passage passage() const;

    // Called before the bytes of any write go out, so that a line drawn on
    // the same terminal (the progress line) can take itself away first.
    void set_before_write(std::function<void()> f) { before_write_ = std::move(f); }

    int poll_fd() const override;
    short poll_events() const override;
    void on_ready(short revents) override;

    // Writes what the reader takes now, without blocking.
    void flush();

    std::uint64_t pending() const { return pending_memory_ + pending_file_; }
    // Not written because the reader left (EPIPE) or after a write error.
    std::uint64_t dropped() const { return dropped_; }
    bool reader_gone() const { return reader_gone_; }
    const std::optional<Error>& error() const { return error_; }
    const std::string& name() const { return name_; }

private:
    enum class Kind { plain, nonblocking, socket };

    // A run of pending bytes: in memory, or in the backlog file.
    struct Piece {
        std::string bytes;
        std::size_t done = 0;  // of bytes, already written
        bool in_file = false;
        std::uint64_t from = 0, to = 0;  // the backlog's bytes, when in_file
    };

    Sink(int fd, std::string name, std::size_t memory_limit) : fd_(fd), name_(std::move(name)), memory_limit_(memory_limit) {}

    bool dead() const { return reader_gone_ || error_.has_value(); }
    ssize_t put(const char* data, std::size_t size);
    ssize_t put_file(int in, std::uint64_t& offset, std::uint64_t length);
    bool write_now(const char*& data, std::size_t& size);
    bool write_file_now(int in, std::uint64_t& offset, std::uint64_t& length);
    void queue(std::string_view bytes);
    void queue_file(int in, std::uint64_t offset, std::uint64_t length);
    void add_memory_piece(std::string_view bytes);
    void add_file_piece(std::uint64_t from, std::uint64_t to);
    void drop_pending();
    void failed(int err);

    int fd_;                  // where the bytes go: the caller's, or own_
    UniqueFd own_;            // our own open file description, non-blocking
    int restore_flags_ = -1;  // the caller's flags to put back (the fallback)
    Kind kind_ = Kind::plain;
    bool sendfile_ok_ = true;
    enum class Passable { no, pipe, file };
    Passable passable_ = Passable::no;
    std::string name_;
    std::size_t memory_limit_;
    UniqueFd backlog_;
    std::uint64_t backlog_end_ = 0;
    std::deque<Piece> pieces_;
    std::uint64_t pending_memory_ = 0;
    std::uint64_t pending_file_ = 0;
    std::uint64_t dropped_ = 0;
    bool reader_gone_ = false;
    std::optional<Error> error_;
    std::function<void()> before_write_;
};

// At the end of a run: waits in poll until every sink has written all it
// holds (or can write no more). When `signal_fd` (< 0: none) is readable,
// `take_stop` reads it and returns a stop signal (SIGINT, SIGTERM, SIGHUP)
// taken, else 0: a stop signal ends the wait and is returned; 0 when
// everything was written, or when `timeout_ms` (>= 0) passed first.
Expected<int> drain(std::span<Sink* const> sinks, int signal_fd, const std::function<int()>& take_stop,
                    int timeout_ms = -1);

}  // namespace pto::output
