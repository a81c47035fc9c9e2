// Reading pto-par's own words back in tests: the devices of a status line,
// the start times of a --json report.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace pto::test {

// The ids of a status line's "devices=0-1,3" (none for "devices=none" or
// no such word).
std::vector<int> status_devices(const std::string& line);

// Label -> its "start" in a --json report, relative to the earliest start;
// jobs that never started are left out.
std::map<std::string, double> report_starts(const std::string& report);

}  // namespace pto::test
