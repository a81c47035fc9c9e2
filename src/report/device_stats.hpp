// Which device saw the failures: per device, how the tries that ran on it
// ended, so that "device 1 hangs the suite" shows on the first run that
// fails, not after weeks of reruns that happened to pass elsewhere.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <pto/scheduler.hpp>

namespace pto::report {

struct DeviceStats {
    std::string node;  // under Slurm: the node whose GPU `id` is; empty otherwise
    int id = 0;
    // Tries that started on it, each try of a retried job counted:
    // jobs == passed + failed + timeout + killed.
    int jobs = 0;
    int passed = 0;   // a flaky job's last try too
    int failed = 0;   // non-zero exit, or a signal pto-par did not send
    int timeout = 0;
    int killed = 0;   // stopped by pto-par (fail-fast, a signal to it): no fault of the device
    bool sick = false;  // its health check failed (RunSummary::sick)

    std::string name() const;  // "1", or "n1:0" under Slurm
    bool saw_failure() const { return failed > 0 || timeout > 0 || sick; }
};

// Every device a try started on, and every sick one, ordered by node and
// id. Tries that never started (a command that could not be spawned) and
// jobs without devices count nowhere.
std::vector<DeviceStats> device_stats(const RunSummary& summary);

// "[pto-par] device 1: 6 jobs, 3 passed, 2 failed, 1 timed out, sick\n";
// killed and sick only when so.
std::string format_device_line(const DeviceStats& d);
// One line per device that saw a failure; empty when none did.
std::string device_lines(const std::vector<DeviceStats>& all);

// The --json record, without the newline: told apart from a job's by
// "record":"device".
std::string device_json(const DeviceStats& d);

// For the JUnit testsuite's <properties>: device.NAME.{jobs,passed,failed,
// timeout,killed,sick} per device, in order.
std::vector<std::pair<std::string, std::string>> device_properties(const std::vector<DeviceStats>& all);

}  // namespace pto::report
