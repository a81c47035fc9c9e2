// The scheduler the pto-par command uses, usable on its own: run jobs in
// parallel, each in a process group (and, where possible, a cgroup) of its own, without a controlling terminal, and
// holding some devices of a pool, so that no device is ever held by two
// running jobs.
//
//     std::vector<pto::Job> jobs;
//     jobs.push_back({"add", 1, [](std::span<const int> ids) -> pto::Expected<pto::LaunchSpec> {
//         return pto::LaunchSpec{{"/bin/sh", "-c", "pytest test_add.py --device " +
//                                 pto::format_device_range(ids)}, {}, {}};
//     }});
//     pto::RunOptions opt;
//     opt.pool = {0, 1, 2, 3};
//     auto summary = pto::run_jobs(std::move(jobs), opt);
//
// run_jobs blocks the calling thread until every job has ended. While it runs
// it owns SIGCHLD (and, with handle_signals, SIGINT/SIGTERM/SIGHUP/SIGUSR1):
// they are blocked and read through a signalfd, and it reaps every child of
// the process, so call it from a process that has no other children to wait
// for. It makes the process a child subreaper for the run, so that what a job
// leaves behind is seen and stopped before its devices are handed on. Other
// threads and signal handlers of the caller are fine: no handler runs in a
// job's child before it execs.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <compare>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <pto/error.hpp>
#include <pto/job_output.hpp>

namespace pto {

// How to start one job once its devices are known.
struct LaunchSpec {
    std::vector<std::string> argv;  // argv[0]: a path, or a name looked up in $PATH
    std::string cwd;                // empty: the caller's
    std::vector<std::string> env;   // "NAME=VALUE" added to the inherited environment, replacing same names
};

// What a job holds once it starts.
struct Allocation {
    std::span<const int> devices;  // ascending
    std::span<const int> ports;    // consecutive TCP ports, empty unless Job::port_count
    // A build function written for the devices alone takes an Allocation too.
    operator std::span<const int>() const { return devices; }
};

struct Job {
    std::string label;
    std::size_t device_count = 1;
    // Receives what the job holds; an error fails this job alone.
    // Under RunOptions::slurm it receives no devices: Slurm picks the GPUs on
    // the node, and the step finds them in its environment (SLURM_STEP_GPUS).
    std::function<Expected<LaunchSpec>(const Allocation&)> build;
    // > 0: instead of device_count whole devices, this many of the
    // RunOptions::device_slots slots of one device, beside other such jobs
    // on it; it receives that one device's id.
    std::size_t slots = 0;
    std::size_t port_count = 0;  // consecutive free TCP ports it needs from RunOptions' range
    std::size_t retries = 0;     // after a failure or its own timeout, run again up to this many times
    std::optional<double> expected_s;  // how long it took last time (history), for RunOptions::backfill
    std::optional<double> timeout_s;  // its own time limit; RunOptions::job_timeout_s if unset
    // Where the job came from, handed to observers with every event so that
    // a report needs no side table (0 and empty when not from a file).
    std::size_t seq = 0;   // 1-based position in the file
    std::size_t line = 0;  // the line it starts on
    std::string command;   // as written, before placeholders are replaced
};

// flaky: passed, but only after an attempt that failed or timed out.
enum class JobStatus { passed, failed, timeout, killed, cancelled, flaky };
const char* to_string(JobStatus s);  // "passed", "failed", ...

// One try of a job that was tried again (Job::retries).
struct Attempt {
    JobStatus status = JobStatus::failed;  // failed or timeout
    std::optional<int> exit_code;
    int signal = 0;
    std::vector<int> devices;
    double start = 0;
    double end = 0;
    double duration_s = 0;
    // Devices that the health check found sick after this try
    // (RunOptions::device_check): the job ran again on others, once, and
    // its verdict is that of the next try.
    std::vector<int> sick;
    std::string node;  // under Slurm: the node it ran on
};

struct JobResult {
    std::size_t index = 0;          // position in the job list
    std::string label;
    JobStatus status = JobStatus::cancelled;
    std::optional<int> exit_code;   // when the main process exited
    // The signal that ended it, 0 if none: for a job pto-par stopped
    // (timeout, killed), the last one it sent before nothing of the job was
    // left, whatever its shell died of.
    int signal = 0;
    // With status timeout: the limit it ran past, its own or (run_time_limit)
    // the run's.
    double time_limit_s = 0;
    bool run_time_limit = false;
    std::vector<int> devices;       // under Slurm: the GPU indices on `node` that the step got
    std::vector<int> ports;         // its TCP ports, if it asked for some
    std::string node;               // under Slurm: the node the step was sent to; empty otherwise
    pid_t pid = -1;                 // -1 if never started (under Slurm: srun's pid)
    double start = 0;               // Unix seconds
    double end = 0;                 // when its devices were released
    double duration_s = 0;
    int stragglers = 0;             // processes of the job stopped after its leader ended (-1: some, count unknown)
    std::string error;              // why it could not start, or what went wrong around it
    // Bytes that reached no one (a full disk): neither kept nor shown as
    // they came; not those discarded by choice.
    std::uint64_t output_lost = 0;
    // Bytes shown as they came that could not be kept: missing from its
    // log and the reports only.
    std::uint64_t output_unkept = 0;
    std::string output;             // filled only with RunOptions::keep_output
    std::vector<Attempt> attempts;  // the tries before the last one, oldest first
};

// One running job, as a SIGUSR1 status report shows it.
struct RunningJob {
    const Job* job;
    const JobResult* result;
    double elapsed_s;
    const JobOutput* output;
};

// A device's health check that runs now (RunOptions::device_check).
struct RunningCheck {
    int device;
    pid_t pid;
    double elapsed_s;
    bool shell_ended;  // what it left behind is being stopped
};

struct StatusReport {
    std::vector<RunningJob> running;
    std::vector<RunningCheck> checks;
    std::size_t queued = 0;    // not started yet
    std::size_t finished = 0;
    double elapsed_s = 0;      // since the run began
    // "LABEL waits for device 0 (held by another run, pid 1234)" when the
    // next job waits for what another run leases; empty otherwise.
    std::string waiting;
};

// Observers see each event as it happens; the CLI's reporters are observers.
class RunObserver {
public:
    virtual ~RunObserver() = default;
    virtual void on_start(const Job&, const JobResult&) {}
    virtual void on_output(const Job&, const JobResult&, std::string_view) {}
    // The same bytes, with everything the job wrote so far (`kept`, the
    // bytes included): what lets a view that starts late show the job's
    // output from its beginning. By default on_output.
    virtual void on_output_live(const Job& job, const JobResult& result, std::string_view bytes,
                                const JobOutput& /*kept*/)
    {
        on_output(job, result, bytes);
    }
    // The job's devices are free again; `output` is everything it wrote
    // (only the end of it without RunOptions::whole_output).
    virtual void on_finish(const Job&, const JobResult&, const JobOutput& output) = 0;
    virtual void on_cancel(const Job&, const JobResult&) {}
    // A try of a job with retries failed or ran out of time and the job will
    // run again: `result` is that try (its last entry in `attempts`), `output`
    // what it wrote. on_finish comes once, for the last try.
    virtual void on_retry(const Job&, const JobResult& /*result*/, const JobOutput& /*output*/) {}
    // The run begins stopping (fail-fast, a signal, the run's time limit):
    // nothing more starts.
    virtual void on_stopping(const char* /*reason*/) {}
    // A job ran out of time: it was sent SIGUSR1 and given the dump grace to
    // print its stacks; `output` is all it wrote so far. It is stopped next.
    virtual void on_timeout(const Job&, const JobResult&, const JobOutput& /*output*/, double /*elapsed_s*/) {}
    // SIGUSR1 to the runner (with handle_signals): where everything stands.
    virtual void on_status(const StatusReport&) {}
    // Something the user should know that is no single job's event, e.g.
    // "out of file descriptors: holding the next job".
    virtual void on_notice(const std::string&) {}
    // One of RunOptions::watched_signals arrived (read in the run's loop,
    // like its own signals, so the observer acts on it outside a handler).
    virtual void on_signal(int /*sig*/) {}
    // The health check of `device` failed (RunOptions::device_check): it is
    // withheld for the rest of the run. `why` says how the check ended,
    // `output` is what it wrote. `node`: under Slurm, the node whose GPU
    // `device` is (SlurmOptions::device_check); empty otherwise.
    virtual void on_device_sick(const std::string& /*node*/, int /*device*/, const std::string& /*why*/,
                                const JobOutput& /*output*/)
    {
    }
    // The next job waits for a device or port another run leases (see
    // RunOptions::lock_dir): `what` names it and its holder, "device 0
    // (held by another run, pid 1234)". Again each time that changes.
    virtual void on_waiting(const Job&, const std::string& /*what*/) {}
};

// Something besides the jobs that the run's one poll() waits on, such as an
// output sink holding bytes for a slow reader: the run asks each client what
// it waits for before every poll, and calls it back when that is ready, so
// that nothing outside poll() ever blocks the loop.
class PollClient {
public:
    virtual ~PollClient() = default;
    virtual int poll_fd() const = 0;          // < 0: nothing to wait for now
    virtual short poll_events() const = 0;    // POLLOUT, POLLIN, ...
    virtual void on_ready(short revents) = 0;
};

// How a job is kept together so that all of it can be stopped before its
// devices are handed on.
enum class Containment {
    automatic,      // a cgroup per job where this process may make them, else process_group
    cgroup,         // a cgroup per job (cgroup v2), or run_jobs fails
    process_group,  // the job's process group, with this process as subreaper
};

// A GPU of a node of a Slurm allocation: "n1:0".
struct NodeDevice {
    std::string node;
    int id = 0;
    auto operator<=>(const NodeDevice&) const = default;
};

// Jobs as job steps of the Slurm allocation this process runs in: each job
// is `srun --exact -N1 -n1 -w NODE --gres=gpu:N` on a node that has N of its
// GPUs free, and is stopped with `scancel --ctld --signal=...`. A job starts
// (its time limit runs, observers see on_start) when its task runs: the wait
// for Slurm to create the step is queueing.
struct SlurmNode {
    std::string name;          // as Slurm names it
    std::size_t devices = 0;   // GPUs the allocation holds on it
    std::size_t cpus = 0;      // CPUs the allocation holds on it; 0: not known
};

struct SlurmOptions {
    std::vector<SlurmNode> nodes;  // of the allocation in $SLURM_JOB_ID, which srun finds itself
    std::string srun = "srun";
    std::string scancel = "scancel";
    std::string squeue = "squeue";
    // --device-check under Slurm: each step's agent checks the GPUs Slurm
    // gave it that the run does not trust yet (the job's build passes the
    // check to the agent); the run tells it which, in the step's
    // environment (PTO_PAR_TRUSTED_GPUS), and keeps a sick GPU from every
    // later step by leaving the step that found it holding it.
    bool device_check = false;
};

struct RunOptions {
    std::vector<int> pool;            // device ids (unused with `slurm`: each node's GPUs are its pool)
    // Slots per device, for jobs that take part of one (Job::slots); a
    // whole-device job takes them all. Not under `slurm`.
    std::size_t device_slots = 1;
    std::size_t max_parallel = 0;     // 0: only the pool bounds it
    bool fail_fast = false;
    // EASY backfill: while the head of the queue waits for devices, a later
    // job with Job::expected_s may start if it will end before the head can
    // start by the running jobs' Job::expected_s.
    bool backfill = false;
    double kill_grace_s = 5.0;        // SIGTERM -> SIGKILL
    std::optional<double> timeout_s;      // the whole run's time limit
    std::optional<double> job_timeout_s;  // each job's, unless Job::timeout_s
    double dump_grace_s = 2.0;        // SIGUSR1 -> the stop, for a timed-out job to print its stacks
    std::size_t output_memory_limit = JobOutput::default_memory_limit;  // per job, before spilling to a file
    SpillPlace spill_place;           // where the spill files are made (see choose_spill_place)
    // Some observer needs on_output (a live view). Without it a job's bytes
    // go from its pipe to its spill file in the kernel (splice).
    bool output_live = true;
    // With output_live, the jobs (by index) whose bytes the observer wants
    // now; empty: every job. The others keep the splice.
    std::function<bool(std::size_t)> output_live_for;
    // The live job's way to standard output without a copy through user
    // space (--output group's live block): where the bytes of the job at
    // `index` may go as they are, now (fd < 0: not now), and whether that
    // job's bytes are shown as they come (Passage::shown). To a pipe they
    // all go in the kernel; to a regular file or /dev/null only what the
    // job's pipe holds before its last 64 KiB does, and that end, which is
    // kept, comes to on_output as any bytes do, for the observer to write
    // to the same place. The bytes of such a job are not kept: only the end
    // of its output is, as without whole_output, so set it only when no
    // observer needs the job whole (without effect with keep_output).
    std::function<JobOutput::Passage(std::size_t)> output_passage;
    bool handle_signals = true;       // SIGINT/SIGTERM/SIGHUP stop the run, SIGUSR1 asks for status
    bool keep_output = false;         // copy each job's output into JobResult::output
    // Some observer reads a job's whole output in on_finish or on_retry (a
    // block on stdout, a JUnit <system-out>, a log file). Without it (and
    // without keep_output) a job's output past output_memory_limit keeps
    // only its last 64 KiB, in memory, for on_timeout and on_status: the
    // rest is discarded as it comes instead of spilled, since writing
    // gigabytes to a file nobody reads back costs about a second per GiB.
    // The JobOutput observers get then holds the tail alone
    // (JobOutput::discarded); bytes discarded so are not output_lost.
    bool whole_output = true;
    // At the end, stop the processes that left their job's process group and
    // were re-parented to this process (children it had before the run are
    // left alone).
    bool stop_escapees = true;
    RunObserver* observer = nullptr;
    std::vector<PollClient*> poll_clients;
    // Signals the observer wants to hear of (RunObserver::on_signal), such
    // as SIGWINCH for a display sized to the terminal: blocked while the run
    // lasts and read from its signalfd, with its own signals.
    std::vector<int> watched_signals;
    // A signalfd of the caller's (its mask at least SIGINT, SIGTERM, SIGHUP
    // and SIGUSR1, as a caller that reads its own signals that way has) for
    // the run to read its signals from, instead of opening one: a
    // descriptor more for the jobs. Its mask takes in the run's signals and
    // keeps them, with those four; -1: the run opens its own. Only with
    // handle_signals: a run that does not handle the caller's signals
    // leaves its descriptor alone and opens its own.
    int signal_fd = -1;
    Containment containment = Containment::automatic;  // without effect under Slurm (slurmd holds the tasks)
    std::optional<SlurmOptions> slurm;
    // The TCP ports jobs draw from (Job::port_count): a second pool, with the
    // same FIFO and the same rule that no two running jobs share one.
    int port_low = 29500;
    int port_high = 30499;
    // A health check of one device, run like a job (in the same loop, with
    // its output kept) on every device before the first job that uses it,
    // and again on a device after a job on it failed, timed out or died of
    // a signal the run did not send, before it is handed on. A check that
    // fails (non-zero, a signal, or past device_check_timeout_s) makes the
    // device sick: withheld for the rest of the run; the job whose failure
    // led to it runs again on other devices, once. Not under `slurm`.
    std::function<Expected<LaunchSpec>(int device)> device_check;
    double device_check_timeout_s = 60;
    // Leases across runs (SPEC 10): the lock directory in which devices and
    // ports are leased while a job uses them; "" for the default place
    // (/run/lock/pto-par, else $TMPDIR/pto-par-locks); nullopt for none.
    // A device or port another run leases is busy: jobs wait for it as for
    // one of this run's. Not under `slurm`, whose nodes Slurm shares out.
    std::optional<std::string> lock_dir;
    // The identity of device `id` on this machine, which names its lease:
    // what a job gets for it in its device variable (a GPU UUID stays a
    // UUID), so that runs given the devices differently agree. Empty: the
    // id's number.
    std::function<std::string(int id)> device_identity;
    // A run inside a job of another run: that job's devices (identities)
    // and ports, leased by the outer run, used without a lease and never
    // waited for.
    std::vector<std::string> inherited_devices;
    std::vector<int> inherited_ports;
};

struct RunSummary {
    std::vector<JobResult> results;  // one per job, in job order
    int stopped_by_signal = 0;       // SIGINT etc. that stopped the run, 0 if none
    bool timed_out = false;          // the run's own time limit expired
    Containment containment = Containment::process_group;  // what was in force
    std::vector<int> withheld;       // devices taken out of the pool: their last job could not be stopped
    std::vector<int> sick;           // devices taken out of the pool: their health check failed (none under Slurm)
    std::vector<NodeDevice> sick_on_nodes;  // under Slurm: the GPUs of nodes whose check failed, in order
};

// What `mode` would give here and now, in words for -v and --dry-run:
// "cgroup v2 (/sys/fs/cgroup/unified)" or "process groups (no cgroup v2: ...)";
// an error when `mode` is cgroup and cgroups cannot be used.
Expected<std::string> describe_containment(Containment mode);

// Fails before starting anything if a job needs more devices than the pool
// holds, or if the process cannot set up its signal and pipe plumbing.
Expected<RunSummary> run_jobs(std::vector<Job> jobs, const RunOptions& options);

}  // namespace pto
