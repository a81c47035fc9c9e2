// The run's two clocks: steady for deadlines, the wall clock for reports.
#pragma once

#include <algorithm>
#include <chrono>

namespace pto::runner {

using Clock = std::chrono::steady_clock;

inline double unix_now()
{
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

inline double seconds(Clock::duration d)
{
    return std::chrono::duration<double>(d).count();
}

// Clamped to a century: a limit of 1e30 seconds means "never", not an
// overflow of the clock's nanoseconds.
inline Clock::duration to_duration(double s)
{
    constexpr double century = 100.0 * 365 * 24 * 3600;
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::clamp(s, 0.0, century)));
}

}  // namespace pto::runner
