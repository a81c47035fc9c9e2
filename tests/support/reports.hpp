// Reading pto-par's own words back in tests: the devices of a status line,
// the start times of a --json report; and what jobs wrote of their own
// holds on devices and ports.
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

// Lines "WHAT BEGIN END WHO" that jobs wrote while they held WHAT (a device,
// a port) from BEGIN to END (seconds, as `date +%s.%N` gives them): each
// pair of holds of one WHAT that overlap, in words ("dev0: a3 [..] and
// b7 [..]"). A job measures inside the time its run holds the thing, so
// any overlap found is one the runs allowed.
std::vector<std::string> overlapping_holds(const std::string& records);

}  // namespace pto::test
