#include "common/signal_names.hpp"

#include <string.h>

namespace pto {

std::string signal_name(int sig)
{
    const char* abbrev = sigabbrev_np(sig);
    return abbrev != nullptr ? std::string("SIG") + abbrev : "SIG" + std::to_string(sig);
}

}  // namespace pto
