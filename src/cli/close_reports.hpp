// The reports written at the end of a run: --json renamed into place,
// JUnit closed, --log-dir's errors taken.
#pragma once

#include <functional>
#include <string>

#include "common/replaced_file.hpp"
#include "report/json_lines.hpp"
#include "report/junit_report.hpp"
#include "report/log_dir.hpp"

namespace pto::cli {

// false when one could not be written in full, each said with `say`; a
// --json that failed on the way is discarded, leaving the file as it was.
// `junit` and `logs` may be null (not asked for).
bool close_reports(ReplacedFile& json_file, const report::JsonLines& json, const std::string& json_path,
                   report::JunitReport* junit, const report::LogDir* logs, double wall_s,
                   const std::function<void(const std::string&)>& say);

}  // namespace pto::cli
