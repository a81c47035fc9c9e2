// The command line, parsed with getopt_long into plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <pto/error.hpp>
#include <pto/scheduler.hpp>

#include "plan/plan.hpp"
#include "report/junit_report.hpp"
#include "report/output_writer.hpp"

namespace pto::cli {

using report::OutputMode;

struct Options {
    std::string devices = "auto";        // -d: a range, "none" or "auto"
    std::optional<std::size_t> jobs;     // -j N; nothing for auto
    std::string platform;                // -p, else $PTO_PLATFORM, else "hw"
    std::optional<std::size_t> device_slots;  // --device-slots K; 1 when not given
    std::string device_check;             // --device-check CMD; empty: none
    double device_check_timeout_s = 60;   // --device-check-timeout
    bool fail_fast = false;
    double kill_grace_s = 5;
    std::optional<double> timeout_s;
    std::optional<double> job_timeout_s;
    double dump_grace_s = 2;
    std::vector<std::string> device_env;  // -e NAME, in order, no duplicates
    bool device_env_none = false;         // -e none: the pool's own variable is not narrowed
    OutputMode output = OutputMode::group;
    std::string json_path;
    std::string junit_path;
    std::uint64_t junit_output_limit = report::JunitReport::default_output_limit;
    bool tag = false;                     // --tag: [label] before each line of a block
    std::string log_dir;
    bool dry_run = false;
    int verbosity = 0;                    // -1 quiet, 0 normal, 1 verbose
    std::string shell = "/bin/sh";
    Containment contain = Containment::automatic;  // --contain
    std::vector<std::string> history;     // --history FILE, in order
    plan::Order order = plan::Order::file;
    std::optional<plan::Shard> shard;     // --shard K/N
    std::string rerun_failed;             // --rerun-failed FILE
    int retries = 0;                      // --retries N; a line's retries= wins
    bool backfill = false;                // --backfill
    int port_low = 29500;                 // --ports LO-HI
    int port_high = 30499;
    std::optional<std::string> lock_dir;  // --lock-dir DIR|none, checked in main with $PTO_PAR_LOCK_DIR
    std::string color = "auto";           // --color auto|always|never
    std::string ci = "auto";              // --ci auto|github|gitlab|none
    std::string progress = "auto";        // --progress auto|always|never
    bool slurm = false;                   // --launcher slurm, else $PTO_PAR_LAUNCHER
    std::string file = "-";               // "-" is standard input
    bool help = false;
    bool version = false;
};

// argv as main() received it. The error says which option and why.
Expected<Options> parse_options(int argc, char** argv);

std::string help_text();

}  // namespace pto::cli
