// Helpers shared by the pto::mp tests.
#pragma once

#include <pto/mp.hpp>

#include <functional>
#include <string>

namespace mp_test {

// what() of the SpawnError a spawn throws, or "" when it completes.
inline std::string spawn_failure(std::function<void(int)> fn, int nprocs, pto::mp::SpawnOptions options = {})
{
    try {
        pto::mp::spawn(std::move(fn), nprocs, options);
    } catch (const pto::mp::SpawnError& e) {
        return e.what();
    }
    return "";
}

inline bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

// Counts its own destructions, to show that a rank's stack was unwound.
struct Tracked {
    explicit Tracked(int& destroyed) : destroyed_(destroyed) {}
    Tracked(const Tracked&) = delete;
    Tracked& operator=(const Tracked&) = delete;
    ~Tracked() { ++destroyed_; }

private:
    int& destroyed_;
};

}  // namespace mp_test
