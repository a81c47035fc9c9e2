// The pto::mp tests run once per context switch: `--mp-context=ucontext` or
// `--mp-context=assembly` makes it what every spawn's `automatic` means.
// Where there is no usable assembly switch, the assembly runs skip (77) and
// say why, rather than test ucontext a second time under another name.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "mp/context.hpp"

#include <cstdio>
#include <string_view>
#include <vector>

int main(int argc, char** argv)
{
    namespace mp = pto::mp;
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--mp-context=ucontext") {
            mp::detail::set_automatic(mp::ContextKind::ucontext);
        } else if (arg == "--mp-context=assembly") {
            const auto chosen = mp::detail::choose_switch(mp::ContextKind::assembly);
            if (!chosen) {
                std::printf("skipped: %s\n", chosen.error().message.c_str());
                return 77;
            }
            mp::detail::set_automatic(mp::ContextKind::assembly);
        } else {
            args.push_back(argv[i]);
        }
    }
    doctest::Context context(static_cast<int>(args.size()), args.data());
    return context.run();
}
