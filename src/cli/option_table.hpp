// getopt_long's table of pto-par's long options and the codes of those
// without a short letter.
#pragma once

#include <getopt.h>

namespace pto::cli {

enum LongOnly {
    opt_kill_grace = 256,
    opt_timeout,
    opt_job_timeout,
    opt_dump_grace,
    opt_output,
    opt_json,
    opt_junit,
    opt_log_dir,
    opt_shell,
    opt_contain,
    opt_history,
    opt_order,
    opt_shard,
    opt_rerun_failed,
    opt_ports,
    opt_retries,
    opt_backfill,
    opt_launcher,
    opt_color,
    opt_ci,
    opt_progress,
    opt_device_slots,
    opt_device_check,
    opt_device_check_timeout,
    opt_tag,
    opt_junit_output_limit,
    opt_lock_dir,
};

// Ends with the all-zero entry getopt_long needs.
extern const option long_options[];

}  // namespace pto::cli
