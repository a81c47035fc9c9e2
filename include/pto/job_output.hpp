// Everything one job wrote to its stdout+stderr pipe, byte-exact, in bounded
// memory: past a limit the bytes go to an unlinked temporary file, so a job
// may print gigabytes without growing the runner. The file's descriptor is
// reserved before the job starts (reserve), so that a shortage of file
// descriptors is known while the job can still wait, never after it has
// printed; the directory is tried once, at run start (choose_spill_place).
// When nobody will read the whole output (tail_only), only its end is
// kept, in memory, and the rest never reaches the disk.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <pto/error.hpp>

namespace pto {

// Where spill files are made.
struct SpillPlace {
    std::string dir;           // empty: $TMPDIR, else /tmp
    bool memory_only = false;  // no usable directory: output stays in memory, unbounded
};

// At run start: the first of $TMPDIR, /tmp, /var/tmp, /dev/shm where a spill
// file can be made and written, else memory only. When that is not $TMPDIR
// (or /tmp without one), `notice` is told once what happens instead, e.g.
// "$TMPDIR '/x' is not writable (Permission denied); job output past 1 MiB
// goes to /tmp instead".
SpillPlace choose_spill_place(const std::function<void(const std::string&)>& notice,
                              std::size_t memory_limit);

// An unlinked temporary file in `place` (never memory_only), read-write.
Expected<int> open_spill_file(const SpillPlace& place);

class JobOutput {
public:
    static constexpr std::size_t default_memory_limit = 1 << 20;

    // Memory only, whatever the size: for jobs that never ran and for tests.
    JobOutput() = default;

    // Reserves the spill file's descriptor now (unless `place` is
    // memory_only); EMFILE and ENFILE come back as errors for the caller to
    // wait on. The file is made in `place` when the output outgrows memory.
    static Expected<JobOutput> reserve(const SpillPlace& place, std::size_t memory_limit = default_memory_limit);

    // For a job whose output nobody needs whole: everything is kept while it
    // fits in `memory_limit` (128 KiB at least); past it only the end stays,
    // in that much memory and never less than the last 64 KiB (what tail()
    // and last_line() show), and the bytes before are discarded as they
    // come, never written anywhere: writing a gigabyte to a spill file costs
    // about a second of page cache even when nobody reads it back. No file,
    // so no descriptor to reserve.
    static JobOutput tail_only(std::size_t memory_limit = default_memory_limit);

    JobOutput(JobOutput&& o) noexcept;
    JobOutput& operator=(JobOutput&& o) noexcept;
    JobOutput(const JobOutput&) = delete;
    JobOutput& operator=(const JobOutput&) = delete;
    ~JobOutput();

    // Keeps the bytes (only the end of them with tail_only). If the spill
    // file cannot take them (a full disk), it moves to the next place of the
    // fallback list after its own ($TMPDIR, /tmp, /var/tmp, /dev/shm) that
    // takes it whole; when none does, they are counted in dropped() and
    // error() says why; the run goes on.
    void append(std::string_view bytes);

    struct Taken {
        std::size_t bytes = 0;  // 0 and !eof: the pipe is empty for now
        bool eof = false;       // the write end is closed, or the pipe is unreadable
        bool refused = false;   // pass_from_pipe only: nothing moved, take them with take_from_pipe
    };
    // Where a job's bytes may go as they are, in the kernel: standard
    // output, when nothing waits to be written before them.
    struct Passage {
        int fd = -1;
        bool pipe = false;  // a pipe; else a regular file or /dev/null
        // The bytes are shown as they come and nobody else keeps them
        // whole: only the end is kept (keep_end_only), with fd or without.
        bool shown = false;
    };
    // Takes what the non-blocking pipe `fd` holds, at most `max_bytes`.
    // With `live` the bytes pass through memory and `live` sees them; without
    // it, once spilled, they go from the pipe to the file by splice(2) and
    // never through user space.
    Taken take_from_pipe(int fd, std::size_t max_bytes, const std::function<void(std::string_view)>& live);

    // Moves what the non-blocking pipe `fd` holds, at most `max_bytes`, to
    // the pipe `to` without a copy through user space (tee and splice).
    // From the first call on only the end of the output is kept, as with
    // tail_only (what was kept whole before is cut to its end): the bytes
    // passed on are nobody else's to keep. That end is kept in a pipe of its
    // own, by reference to the same pages, until settle(). `refused` when
    // `to` takes nothing now (full: EAGAIN) or cannot take a tee: the bytes
    // are still in `fd`.
    Taken pass_from_pipe(int fd, std::size_t max_bytes, const Passage& to);
    // To a regular file or /dev/null `to`: splices on what the non-blocking
    // pipe `fd` holds before its last tail_keep bytes, and leaves that end
    // for take_from_pipe to read (and its `live` to write), as it is kept:
    // see the .cpp for why not a tee. Only the end is kept from then on, as
    // with keep_end_only(). False when
    // `to` took less than that (it takes no splice, or is full): what is
    // left is for the usual read.
    bool pass_before_end(int fd, const Passage& to);
    // From now on only the end is kept, as with tail_only; what was kept
    // whole before is cut to its end and its spill file closed.
    void keep_end_only();
    // What pass_from_pipe keeps of the end goes into memory, where tail(),
    // last_line() and the other readers see it. Before anyone reads.
    void settle();

    // A full disk (SPEC: a full disk pauses, never drops): when no place
    // of the fallback list has room for the spill file, the bytes already
    // taken wait in memory and take_from_pipe reads nothing more, trying
    // the file again at each call, until there is room.
    bool paused() const { return paused_; }
    // From now on no pause: what cannot be written is lost, as the run must
    // end (its time limit, a signal).
    void stop_pausing();

    // Bytes of output taken from the job and not lost: with tail_only the
    // first discarded() of them are no longer held, and only the bytes
    // [discarded(), size()) of the output are kept.
    std::uint64_t size() const
    {
        return discarded_ + passed_ + held_back_.size() + (spilled_ ? file_size_ : memory().size());
    }
    std::uint64_t discarded() const { return discarded_; }  // by choice (tail_only): not lost
    // A view that writes bytes out as they come (RunObserver::on_output_live)
    // says which it wrote: `count` bytes from `from_end` bytes before the
    // end of what was taken. Those that cannot be kept are unkept_shown(),
    // not dropped(). Const, as the view is handed what is kept read-only:
    // this changes no byte of it, only how a loss is counted.
    void mark_shown(std::size_t from_end, std::size_t count) const;
    // Bytes that reached no one: not kept (a full disk), and not shown as
    // they came either.
    std::uint64_t dropped() const { return dropped_ - unkept_shown(); }
    // Bytes shown as they came that could not be kept: on standard output,
    // missing only from what is kept (its log, the reports, a block shown
    // again).
    std::uint64_t unkept_shown() const;
    const std::optional<Error>& error() const { return error_; }
    bool spilled() const { return spilled_; }  // never with tail_only

    // The kept bytes are memory() followed, when spilled(), by file bytes
    // [0, size()) of spill_fd(): what lets a sink send them in the kernel.
    std::string_view memory() const { return tail_only_ ? std::string_view(memory_.data(), held_) : memory_; }
    int spill_fd() const { return fd_; }

    // Hands the kept bytes to `sink` in order, in chunks of at most 64 KiB
    // once spilled. A sink that returns false stops the walk.
    Expected<void> for_each_chunk(const std::function<bool(std::string_view)>& sink) const;

    // All kept bytes as one string; for small outputs and tests.
    Expected<std::string> str() const;

    // The last `max_bytes` bytes kept (at most 64 KiB), read back from the
    // spill file when spilled; empty if it cannot be read.
    std::string tail(std::size_t max_bytes) const;

    // The last line, complete or not, without its newline (status reports).
    std::string last_line() const;

    // Once after the spill file moved to another place: what happened, for
    // a notice naming the job.
    std::optional<std::string> take_notice();

private:
    static constexpr std::size_t tail_keep = 64 * 1024;

    // tail_only: the most memory holds, cut back to tail_keep when it is
    // full. Twice the tail at least, so that a cut, which copies tail_keep
    // bytes, comes at most once per tail_keep bytes taken.
    std::size_t tail_bound() const { return std::max(memory_limit_, 2 * tail_keep); }
    static constexpr int wide_pipe = 1 << 20;

    void spill();
    void write_file(std::string_view bytes);
    void keep_tail(std::string_view bytes);
    void close_file();
    bool move_to_next_place(int err);
    // Writes what waited for room; false when it still finds none.
    bool resume();

    // Past memory_limit_, the job's pipe `fd` is made wider.
    void widen(int fd);
    bool begin_passing();
    void end_passing();
    // Makes room in the end's pipe when it holds much (or `now`): what lies
    // before its last tail_keep bytes goes.
    void trim_passed(bool now = false);
    // Empties the end's pipe: its bytes count as discarded.
    void drop_passed();
    // Bytes passed on and not kept came after what memory holds, which is
    // then no longer part of the end: it counts as discarded too, so that
    // the end read next is never joined to bytes from before the gap.
    void forget_held();

    std::size_t memory_limit_ = default_memory_limit;
    bool widened_ = false;  // the pipe's size, after the job printed a lot
    SpillPlace place_{{}, true};  // where to spill; memory_only: never
    std::string memory_;    // tail_only: a buffer, of which the first held_ bytes are kept
    std::size_t held_ = 0;
    int fd_ = -1;           // /dev/null until spilled, then the spill file
    bool tail_only_ = false;
    bool spilled_ = false;
    std::uint64_t file_size_ = 0;
    std::uint64_t discarded_ = 0;
    std::uint64_t dropped_ = 0;
    // Once a write failed every later byte is dropped too: the bytes
    // dropped are those taken from drop_from_ on, in order.
    std::uint64_t drop_from_ = 0;
    // Bytes taken so far, and which of them (ranges of that count, in
    // order) were shown as they came.
    std::uint64_t taken_ = 0;
    mutable std::vector<std::pair<std::uint64_t, std::uint64_t>> shown_;
    std::optional<Error> error_;
    std::string notice_;  // take_notice()
    bool pausable_ = false;    // in take_from_pipe
    bool never_pause_ = false;
    bool paused_ = false;
    bool pause_said_ = false;  // the notice of this pause is given
    std::string held_back_;    // taken, waiting for room in the spill file
    // pass_from_pipe: the end of the output not settled yet, a pipe's two
    // ends, how many bytes it holds, and /dev/null for what is trimmed.
    int passed_r_ = -1, passed_w_ = -1;
    std::uint64_t passed_ = 0;
    std::uint64_t passed_room_ = 0;  // the end pipe's size
    int null_ = -1;
};

}  // namespace pto
