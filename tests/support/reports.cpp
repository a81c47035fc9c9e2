#include "reports.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>

#include "plan/json_value.hpp"
#include "process.hpp"

namespace pto::test {

std::vector<int> status_devices(const std::string& line)
{
    std::vector<int> devices;
    std::istringstream words(line);
    for (std::string w; words >> w;) {
        if (w.rfind("devices=", 0) != 0 || w == "devices=none")
            continue;
        std::stringstream ids(w.substr(8));
        for (std::string part; std::getline(ids, part, ',');) {
            const auto dash = part.find('-');
            const int lo = std::stoi(part.substr(0, dash));
            const int hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
            for (int d = lo; d <= hi; ++d)
                devices.push_back(d);
        }
    }
    return devices;
}

std::map<std::string, double> report_starts(const std::string& report)
{
    std::map<std::string, double> out;
    double first = 0;
    for (const auto& line : lines_with(report, "\"label\"")) {
        auto v = pto::plan::parse_json(line);
        REQUIRE(v);
        const auto* o = v->object();
        const auto start = o->at("start").number();
        if (!start)
            continue;
        out[*o->at("label").string()] = *start;
        if (first == 0 || *start < first)
            first = *start;
    }
    for (auto& [label, t] : out)
        t -= first;
    return out;
}

std::vector<std::string> overlapping_holds(const std::string& records)
{
    struct Hold {
        double begin, end;
        std::string who;
    };
    std::map<std::string, std::vector<Hold>> by_what;
    std::istringstream in(records);
    for (std::string line; std::getline(in, line);) {
        std::istringstream words(line);
        std::string what;
        Hold h{};
        REQUIRE_MESSAGE(static_cast<bool>(words >> what >> h.begin >> h.end >> h.who), "bad record: " << line);
        by_what[what].push_back(h);
    }
    std::vector<std::string> overlaps;
    for (auto& [what, holds] : by_what) {
        std::sort(holds.begin(), holds.end(), [](const Hold& a, const Hold& b) { return a.begin < b.begin; });
        // Sorted by start: a hold overlaps an earlier one iff it starts
        // before the latest end seen so far.
        std::size_t latest = 0;
        for (std::size_t i = 1; i < holds.size(); ++i) {
            if (holds[i].begin < holds[latest].end)
                overlaps.push_back(what + ": " + holds[latest].who + " [" + std::to_string(holds[latest].begin) +
                                   ", " + std::to_string(holds[latest].end) + "] and " + holds[i].who + " [" +
                                   std::to_string(holds[i].begin) + ", " + std::to_string(holds[i].end) + "]");
            if (holds[i].end > holds[latest].end)
                latest = i;
        }
    }
    return overlaps;
}

}  // namespace pto::test
