// The pto::mp tests run once per context switch: `--mp-switch=ucontext` runs
// them on the portable swapcontext path instead of the default one.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "mp/context.hpp"

#include <string_view>
#include <vector>

int main(int argc, char** argv)
{
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--mp-switch=ucontext")
            pto::mp::detail::set_default_switch(pto::mp::detail::SwitchKind::ucontext);
        else if (arg == "--mp-switch=assembly")
            pto::mp::detail::set_default_switch(pto::mp::detail::SwitchKind::assembly);
        else
            args.push_back(argv[i]);
    }
    doctest::Context context(static_cast<int>(args.size()), args.data());
    return context.run();
}
