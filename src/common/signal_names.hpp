#pragma once

#include <string>

namespace pto {

// "SIGSEGV", or "SIG34" for one without a name.
std::string signal_name(int sig);

}  // namespace pto
