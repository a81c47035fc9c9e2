#include "reports.hpp"

#include <doctest/doctest.h>

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

}  // namespace pto::test
