#include "cli/close_reports.hpp"

namespace pto::cli {

bool close_reports(ReplacedFile& json_file, const report::JsonLines& json, const std::string& json_path,
                   report::JunitReport* junit, const report::LogDir* logs, double wall_s,
                   const std::function<void(const std::string&)>& say)
{
    bool ok = true;
    if (json_file && !json.ok()) {
        json_file.discard();
        say("writing --json file '" + json_path + "' failed; the file is left as it was");
        ok = false;
    } else if (json_file) {
        if (auto committed = json_file.commit(); !committed) {
            say(committed.error().message);
            ok = false;
        }
    }
    if (junit != nullptr) {
        if (auto closed = junit->close(wall_s); !closed) {
            say("--junit: " + closed.error().message);
            ok = false;
        } else if (junit->error()) {
            say("--junit: " + junit->error()->message);
            ok = false;
        }
    }
    if (logs != nullptr && logs->error()) {
        say("--log-dir: " + logs->error()->message);
        ok = false;
    }
    return ok;
}

}  // namespace pto::cli
