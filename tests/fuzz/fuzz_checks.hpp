// What the fuzzers check, shared with the corpus replay that runs in every
// test run, so a crash once found stays a regression test.
#pragma once

#include <string_view>

namespace pto::fuzz {

// Each aborts when a promise of the parser under test is broken.
void check_device_range(std::string_view text);
void check_commands_file(std::string_view text);
void check_step_stream(std::string_view text);

}  // namespace pto::fuzz
