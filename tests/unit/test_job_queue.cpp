#include <doctest/doctest.h>

#include "queue/job_queue.hpp"

using pto::queue::JobQueue;
using V = std::vector<std::size_t>;

TEST_SUITE("job_queue") {

TEST_CASE("file order, with retries ahead of the head")
{
    JobQueue q(3);
    CHECK(q.front() == 0u);
    CHECK_FALSE(q.front_is_retry());
    q.pop_front();
    q.push_retry(0);
    CHECK(q.front() == 0u);
    CHECK(q.front_is_retry());
    CHECK(q.waiting() == 3);
    q.pop_front();
    CHECK(q.front() == 1u);
    q.pop_front();
    q.pop_front();
    CHECK(q.empty());
}

TEST_CASE("a job taken out of turn is skipped when its turn comes")
{
    JobQueue q(4);
    CHECK(q.behind_head() == V{1, 2, 3});
    q.take(2);
    CHECK(q.behind_head() == V{1, 3});
    q.pop_front();
    q.pop_front();
    CHECK(q.front() == 3u);
    CHECK(q.waiting() == 1);
}

TEST_CASE("drop_unless takes out what cannot fit, retries first, in order")
{
    JobQueue q(4);
    q.pop_front();
    q.push_retry(0);
    std::vector<std::pair<std::size_t, bool>> dropped;
    q.drop_unless([](std::size_t i) { return i == 2; },
                  [&](std::size_t i, bool retry) { dropped.emplace_back(i, retry); });
    CHECK(dropped == std::vector<std::pair<std::size_t, bool>>{{0, true}, {1, false}, {3, false}});
    CHECK(q.front() == 2u);
    V drained;
    q.drain([&](std::size_t i) { drained.push_back(i); });
    CHECK(drained == V{2});
    CHECK(q.empty());
}

}
