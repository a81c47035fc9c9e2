#include "runner/signal_names.hpp"

#include <string.h>

namespace pto::runner {

std::string signal_name(int sig)
{
    const char* abbrev = sigabbrev_np(sig);
    return abbrev != nullptr ? std::string("SIG") + abbrev : "SIG" + std::to_string(sig);
}

}  // namespace pto::runner
