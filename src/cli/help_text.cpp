#include "cli/options.hpp"

namespace pto::cli {

std::string help_text()
{
    return R"(Usage: pto-par [OPTION]... [FILE]
Run the commands of FILE (or standard input) in parallel, each job holding its
own devices from a pool, so that no two running jobs ever share a device.

Devices and parallelism:
  -d, --devices SPEC     device pool: 0-3, 0,2-4,7, none, or auto (default
                         auto: the first of $PTO_PAR_DEVICES,
                         $ASCEND_RT_VISIBLE_DEVICES, $CUDA_VISIBLE_DEVICES,
                         $SLURM_STEP_GPUS, $SLURM_JOB_GPUS that is set, else
                         /dev/davinciN, else /dev/nvidiaN, else no devices)
      --device SPEC      same as --devices
  -j, --jobs N|auto      most jobs at once (default auto: the pool's slots on
                         hardware, min(nproc, slots) on a *sim platform, nproc
                         with no devices)
  -p, --platform NAME    platform; a name ending in 'sim' is a simulator
                         (default $PTO_PLATFORM, else hw)
      --device-slots K   K slots per device: a line's slots=S takes S of one
                         device, beside other such jobs (default 1)
      --device-check CMD run CMD (with {devices}, PTO_PAR_DEVICES: one device)
                         on each device before its first job and after a job
                         on it failed; a device whose check fails is withheld
                         and that job runs again elsewhere, once
      --device-check-timeout SECS  a check's time limit (default 60)
  -e, --device-env NAME  also give each job its device ids in variable NAME
                         (repeatable); the variable the pool came from gets
                         them without -e; -e none: it is left as it was
      --shell PATH       run each line as PATH -c LINE (default /bin/sh)

Failures and limits:
  -x, --fail-fast        after the first failure start nothing more and stop
                         the running jobs
      --kill-grace SECS  SIGTERM to SIGKILL grace when stopping jobs (default 5)
      --timeout SECS     time limit for the whole run
      --job-timeout SECS time limit for each job (a line's timeout= wins)
      --dump-grace SECS  time a timed-out job gets to print its stacks
                         (default 2)
      --contain HOW      keep each job together so all of it can be stopped:
                         cgroup (a cgroup v2 per job), pgroup (its process
                         group), auto (default: cgroup where possible)
      --launcher HOW     local (default, or $PTO_PAR_LAUNCHER), or slurm:
                         each job a step of the Slurm allocation this runs
                         in, on a node with the GPUs it needs

Large suites:
      --history FILE     an earlier run's --json report, for each job's last
                         duration and status (repeatable; a missing FILE is
                         fine)
      --order HOW        file (default: the order of FILE) or longest (jobs
                         without history first, then the longest first)
      --backfill         while the next job waits for devices, start a later
                         one that history says ends before it could start
      --shard K/N        run only shard K of N: the split depends only on FILE
                         and the history, so N machines run disjoint parts
      --rerun-failed FILE  run only the jobs that did not pass in that --json
                         report, and those it does not know
      --ports LO-HI      the TCP ports a line's ports=N draws from (default
                         29500-30499)
      --lock-dir DIR     lease each device and port in DIR while a job uses
                         it, so that other pto-par runs on this machine never
                         get it at once (default: $PTO_PAR_LOCK_DIR, else
                         /run/lock/pto-par); none: no leases, and such a
                         run is not seen by others
      --retries N        run a job that fails or times out again, up to N more
                         times (a line's retries= wins); passing later is flaky

Output and reports:
      --output MODE      group (default: each job's output whole when it
                         ends, or as it comes while it runs alone), stream
                         (lines as they come, prefixed [label]), failed
                         (group, only jobs that did not pass), none
      --json FILE        one JSON object per job (JSON Lines)
      --junit FILE       JUnit XML report
      --junit-output-limit BYTES  most of a job's output in --junit (default
                         4M): past it, its head and tail
      --tag              with --output group or failed, prefix each line of a
                         block with [label], as stream does
      --log-dir DIR      each job's output in its own file
      --color WHEN       colour the verdicts on standard error: auto (default:
                         on a terminal, unless NO_COLOR is set or TERM=dumb),
                         always, never
      --ci KIND          mark each job's output as a foldable section of a CI
                         log and annotate failures: auto (default: from
                         GITHUB_ACTIONS / GITLAB_CI), github, gitlab, none
      --progress WHEN    a progress line kept at the bottom of the terminal:
                         auto (default: when standard error is a terminal,
                         TERM is not dumb and no CI log is written), always,
                         never
  -n, --dry-run          check FILE and print the plan; run nothing
  -q, --quiet            status lines only for jobs that did not pass
  -v, --verbose          more status lines
  -h, --help             this help
  -V, --version          the version

Each line of FILE is one job, run by the shell; '@2 CMD' needs two devices,
'@0 CMD' none, '@slots=1 CMD' one slot of a device, '@label=NAME,timeout=SECS'
sets more (see pto-par.cmds(5)).
{devices}, {device_list}, {ndevices}, {label} and {seq} are replaced in CMD.

Exit status: 0 all passed, 1 some job failed, timed out or was killed,
2 usage or file error (nothing ran), 124 --timeout expired, 128+N stopped
by signal N.
)";
}

}  // namespace pto::cli
