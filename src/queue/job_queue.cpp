#include "queue/job_queue.hpp"

namespace pto::queue {

void JobQueue::skip_left()
{
    while (next_ < left_.size() && left_[next_])
        ++next_;
}

std::optional<std::size_t> JobQueue::front()
{
    if (!again_.empty())
        return again_.front();
    skip_left();
    if (next_ < left_.size())
        return next_;
    return std::nullopt;
}

void JobQueue::pop_front()
{
    if (!again_.empty()) {
        again_.pop_front();
        return;
    }
    skip_left();
    if (next_ < left_.size())
        ++next_;
}

std::vector<std::size_t> JobQueue::behind_head()
{
    std::vector<std::size_t> behind;
    skip_left();
    for (std::size_t i = next_ + 1; i < left_.size(); ++i)
        if (!left_[i])
            behind.push_back(i);
    return behind;
}

bool JobQueue::empty()
{
    return !front().has_value();
}

std::size_t JobQueue::waiting()
{
    std::size_t n = again_.size();
    for (std::size_t i = next_; i < left_.size(); ++i)
        n += left_[i] ? 0 : 1;
    return n;
}

void JobQueue::drop_unless(const std::function<bool(std::size_t)>& fits,
                           const std::function<void(std::size_t, bool)>& drop)
{
    for (auto it = again_.begin(); it != again_.end();) {
        if (fits(*it)) {
            ++it;
            continue;
        }
        const std::size_t i = *it;
        it = again_.erase(it);
        drop(i, true);
    }
    for (std::size_t i = next_; i < left_.size(); ++i) {
        if (left_[i] || fits(i))
            continue;
        left_[i] = true;
        drop(i, false);
    }
}

void JobQueue::drain(const std::function<void(std::size_t)>& drop)
{
    for (; !again_.empty(); again_.pop_front())
        drop(again_.front());
    for (; next_ < left_.size(); ++next_)
        if (!left_[next_])
            drop(next_);
}

}  // namespace pto::queue
