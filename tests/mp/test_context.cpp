// Which context switch a spawn gets. choose_switch is pure, so these cases
// hand it machines with and without an assembly switch and a shadow stack.
#include "mp/context.hpp"

#include <doctest/doctest.h>
#include <pto/mp.hpp>

#include <stdexcept>

namespace mp = pto::mp;
using mp::ContextKind;
using mp::detail::choose_switch;
using mp::detail::SwitchKind;

namespace {

constexpr unsigned long shstk_on = 1;  // ARCH_SHSTK_SHSTK
constexpr unsigned long wrss_only = 2;  // ARCH_SHSTK_WRSS without a shadow stack

}  // namespace

TEST_SUITE("mp.context")
{
    TEST_CASE("automatic is the assembly switch where it is built and no shadow stack is on")
    {
        CHECK(choose_switch(ContextKind::automatic, ContextKind::automatic, true, 0).value() == SwitchKind::assembly);
        CHECK(choose_switch(ContextKind::automatic, ContextKind::automatic, true, wrss_only).value() ==
              SwitchKind::assembly);
        CHECK(choose_switch(ContextKind::automatic, ContextKind::automatic, false, 0).value() ==
              SwitchKind::ucontext);
    }

    TEST_CASE("under an active shadow stack automatic falls back to ucontext")
    {
        CHECK(choose_switch(ContextKind::automatic, ContextKind::automatic, true, shstk_on).value() ==
              SwitchKind::ucontext);
        CHECK(choose_switch(ContextKind::automatic, ContextKind::automatic, true, shstk_on | wrss_only).value() ==
              SwitchKind::ucontext);
    }

    TEST_CASE("asking for assembly where it is missing or unsafe is an error that says which")
    {
        const auto missing = choose_switch(ContextKind::assembly, ContextKind::automatic, false, 0);
        REQUIRE_FALSE(missing);
        CHECK(missing.error().message == "this build has no assembly context switch for its CPU");
        const auto unsafe = choose_switch(ContextKind::assembly, ContextKind::automatic, true, shstk_on);
        REQUIRE_FALSE(unsafe);
        CHECK(unsafe.error().message.find("CET shadow stack") != std::string::npos);
        CHECK(choose_switch(ContextKind::assembly, ContextKind::automatic, true, 0).value() == SwitchKind::assembly);
    }

    TEST_CASE("ucontext is always there, and the build's meaning of automatic is followed")
    {
        for (const bool built : {false, true}) {
            for (const unsigned long shstk : {0UL, shstk_on}) {
                CHECK(choose_switch(ContextKind::ucontext, ContextKind::automatic, built, shstk).value() ==
                      SwitchKind::ucontext);
                CHECK(choose_switch(ContextKind::automatic, ContextKind::ucontext, built, shstk).value() ==
                      SwitchKind::ucontext);
            }
        }
        CHECK(choose_switch(ContextKind::automatic, ContextKind::assembly, true, 0).value() == SwitchKind::assembly);
        CHECK_FALSE(choose_switch(ContextKind::automatic, ContextKind::assembly, false, 0));
    }

    TEST_CASE("spawn with context = assembly runs on it, or throws std::invalid_argument where it cannot")
    {
        int runs = 0;
        const auto body = [&](int) {
            mp::yield();
            ++runs;
        };
        if (choose_switch(ContextKind::assembly)) {
            mp::spawn(body, 3, {.context = ContextKind::assembly});
            CHECK(runs == 3);
        } else {
            MESSAGE("no usable assembly switch here: spawn must refuse it");
            CHECK_THROWS_AS(mp::spawn(body, 3, {.context = ContextKind::assembly}), std::invalid_argument);
            CHECK(runs == 0);
        }
        mp::spawn(body, 2, {.context = ContextKind::ucontext});
        CHECK(runs % 3 == 2);
    }

    TEST_CASE("this thread's shadow stack status is read without failing")
    {
        // Only an x86-64 Linux 6.6 with a CET-enabled glibc and CPU has one;
        // everywhere else the answer must be "none", never an error.
        const unsigned long features = mp::detail::shadow_stack_features();
        if (features & shstk_on)
            CHECK(choose_switch(ContextKind::automatic, ContextKind::automatic, true, features).value() ==
                  SwitchKind::ucontext);
        else
            CHECK(features == 0);
    }
}
