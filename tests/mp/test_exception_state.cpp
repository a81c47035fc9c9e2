#include <doctest/doctest.h>
#include <pto/mp.hpp>

#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace mp = pto::mp;

namespace {

std::string rethrown_message()
{
    try {
        throw;
    } catch (const std::exception& e) {
        return e.what();
    }
}

}  // namespace

TEST_SUITE("mp.exception_state")
{
    TEST_CASE("nested catch blocks and throw; across switches keep each rank's own exceptions")
    {
        std::vector<std::string> log;
        mp::spawn(
            [&](int rank) {
                const std::string me = std::to_string(rank);
                try {
                    throw std::runtime_error("outer " + me);
                } catch (...) {
                    mp::yield();
                    try {
                        throw std::logic_error("inner " + me);
                    } catch (...) {
                        mp::yield();
                        log.push_back(me + ": " + rethrown_message());
                    }
                    mp::yield();
                    log.push_back(me + ": " + rethrown_message());
                }
                log.push_back(me + ": current " + (std::current_exception() ? "set" : "empty"));
            },
            2);
        CHECK(log == std::vector<std::string>{"0: inner 0", "1: inner 1", "0: outer 0", "0: current empty",
                                              "1: outer 1", "1: current empty"});
    }

    TEST_CASE("std::uncaught_exceptions() counts the rank's own exceptions only")
    {
        std::vector<std::string> log;
        struct YieldsInDestructor {
            std::vector<std::string>& log;
            ~YieldsInDestructor()
            {
                log.push_back("0 unwinding: " + std::to_string(std::uncaught_exceptions()));
                mp::yield();
                log.push_back("0 resumed: " + std::to_string(std::uncaught_exceptions()));
            }
        };
        mp::spawn(
            [&](int rank) {
                if (rank == 0) {
                    try {
                        YieldsInDestructor y{log};
                        throw 1;
                    } catch (int) {
                    }
                } else {
                    log.push_back("1: " + std::to_string(std::uncaught_exceptions()));
                    mp::yield();
                }
            },
            2);
        CHECK(log == std::vector<std::string>{"0 unwinding: 1", "1: 0", "0 resumed: 1"});
    }

    TEST_CASE("an exception being handled by one rank is not another's")
    {
        std::vector<bool> has_current;
        mp::spawn(
            [&](int rank) {
                if (rank == 0) {
                    try {
                        throw 1;
                    } catch (int) {
                        mp::yield();
                    }
                } else {
                    has_current.push_back(std::current_exception() != nullptr);
                }
            },
            2);
        CHECK(has_current == std::vector<bool>{false});
    }
}
