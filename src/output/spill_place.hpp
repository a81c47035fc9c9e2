// Where job output past memory goes: an anonymous file in $TMPDIR, or in
// the next place that takes a byte (choose_spill_place and open_spill_file
// in <pto/job_output.hpp> are built on these).
#pragma once

#include <string>

#include <pto/error.hpp>

namespace pto::spill {

// $TMPDIR, else /tmp.
std::string tmpdir_from_environment();

// An anonymous file that vanishes with its descriptor: nothing to clean up
// even if the runner is SIGKILLed.
Expected<int> open_anonymous_file(const std::string& dir);

}  // namespace pto::spill
