// The order jobs start in, and nothing else: FIFO in file order with
// head-of-line blocking, jobs to try again ahead of it, jobs taken out of
// turn (backfilled, cancelled). Pure: it knows indices, not processes.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

namespace pto::queue {

class JobQueue {
public:
    explicit JobQueue(std::size_t jobs) : left_(jobs, false) {}

    // The job whose turn it is: the oldest one to try again, else the head
    // of the file order. Nothing when no job waits.
    std::optional<std::size_t> front();
    bool front_is_retry() const { return !again_.empty(); }
    // The front started, or will never run.
    void pop_front();

    void push_retry(std::size_t index) { again_.push_back(index); }

    // The jobs behind the head, in order, that have not left the queue.
    std::vector<std::size_t> behind_head();
    // `index`, behind the head, leaves the queue before its turn.
    void take(std::size_t index) { left_[index] = true; }
    // Whether `index` waits in file order (not started, not taken out).
    bool waits_in_order(std::size_t index)
    {
        skip_left();
        return index >= next_ && index < left_.size() && !left_[index];
    }

    bool empty();
    std::size_t waiting();

    // Takes out every waiting job that `fits` rejects and hands it to
    // `drop` with whether it was one to try again, in queue order.
    void drop_unless(const std::function<bool(std::size_t)>& fits,
                     const std::function<void(std::size_t, bool retry)>& drop);
    // Takes out all that wait, in queue order.
    void drain(const std::function<void(std::size_t)>& drop);

private:
    void skip_left();

    std::vector<bool> left_;         // taken out before its turn came
    std::size_t next_ = 0;           // head of the file order
    std::deque<std::size_t> again_;  // to try again: ahead of the head
};

}  // namespace pto::queue
