// The loop of one run: events from the process set in, decisions from the
// queue and the placement, events out to the observer — fail-fast, the
// run's time limit and stopping on signals included. The jobs' processes
// are JobProcess's, their stop stages JobLifecycle's; the one blocking call
// is ProcessSet::wait, whose timeout is the next deadline.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <pto/scheduler.hpp>

#include "devices/leases.hpp"
#include "placement/placement.hpp"
#include "queue/backfill.hpp"
#include "queue/job_queue.hpp"
#include "runner/cgroup.hpp"
#include "runner/escapees.hpp"
#include "runner/launcher.hpp"
#include "runner/process_set.hpp"
#include "runner/signal_channel.hpp"
#include "runner/slurm_step.hpp"

namespace pto::runner {

class Run {
public:
    Run(std::vector<Job>& jobs, const RunOptions& opt, SignalChannel& signals, const LaunchContext& ctx,
        RunCgroup* cgroup, Helpers& helpers, placement::Placement& placement, leases::LockDir* locks);

    Expected<void> loop();
    RunSummary take();

private:
    placement::Need need(std::size_t index) const;
    void start_ready();
    void backfill(std::size_t head);
    void start_unplaced(std::size_t head);
    void note_waiting(std::size_t index);
    bool start(std::size_t index, placement::Grant grant);
    Expected<std::unique_ptr<JobProcess>> spawn(std::size_t index, const LaunchSpec& spec, JobOutput output,
                                                const StopTimes& times);
    void fail_to_start(std::size_t index, placement::Grant grant, const Error& why);
    void throttle(const Error& why);
    void note_step_start(JobProcess& j);
    void notice(const std::string& text);
    void on_signal(int sig);
    void on_leader_exit(JobProcess& j);
    void read(JobProcess& j, int max_reads);
    void begin_stopping(const char* reason);
    void stop_all(const char* reason);
    void stop(JobProcess& j);
    bool was_created(JobProcess& j);
    void node_lost(const placement::Grant& grant, const std::string& why);
    void withhold_step(const placement::Grant& grant);
    void check_deadlines(Clock::time_point now);
    void deliver_dump(JobProcess& j);
    void quarantine(JobProcess& j);
    void cancel_unfittable();
    std::string why_unusable() const;
    void report_status();
    void finish_ended();
    void show_live();
    void end_try(JobProcess& j);
    void never_ran(JobProcess& j);
    void report(JobProcess& j, bool abandoned);
    std::size_t running_jobs() const;
    // Health checks (run_health.cpp).
    void check_all_devices();
    bool wants_check(const JobProcess& j) const;
    bool check_first(const placement::Grant& grant);
    void park(std::unique_ptr<JobProcess> j);
    void start_checks(std::size_t batch);
    void check_ended(JobProcess& check, const std::string& could_not_stop);
    void settle(std::size_t batch, int id, const std::string& why, const JobOutput& output);
    void verdict(std::size_t batch);
    // Health checks in Slurm steps (run_step_health.cpp).
    std::string trusted_on(const std::string& node) const;
    void distrust(const std::string& node, const std::vector<int>& gpus);
    void take_verdicts(JobProcess& j);
    void hold(JobProcess& j);
    void release_holders();
    void take_status(JobProcess& j, int wait_status);
    bool will_retry(std::size_t index) const;
    void retry(std::size_t index, const JobOutput& output, std::vector<int> sick = {});
    int poll_timeout_ms(Clock::time_point now) const;
    void sweep_escapees();

    std::vector<Job>& jobs_;
    const RunOptions& opt_;
    const LaunchContext& ctx_;
    RunCgroup* cgroup_;
    // Before set_, which outlives neither: a step's StepState signals through
    // step_control_, and each lifecycle keeps a pointer to its StopTimes, up
    // to ~ProcessSet, which kills what is left.
    StepControl step_control_{};
    StopTimes stop_times_;
    StopTimes check_times_;
    ProcessSet set_;
    Helpers& helpers_;
    placement::Placement& placement_;
    queue::JobQueue queue_;
    queue::Ledger ledger_;
    std::vector<JobResult> results_;
    std::vector<placement::Grant> grants_;  // per job: what it holds while it runs
    std::vector<std::unique_ptr<JobProcess>> abandoned_;  // could not be stopped
    std::vector<int> withheld_;
    // Devices held while their health check runs, with the job whose
    // failure asked for it (parked: its report waits for the verdict).
    struct CheckBatch {
        std::optional<std::size_t> job;
        std::unique_ptr<JobProcess> parked;
        std::vector<placement::Grant> pieces;  // one device each, held until its check ends
        std::size_t pending = 0;
        std::vector<int> sick;
    };
    std::vector<CheckBatch> batches_;
    std::vector<int> sick_;
    std::vector<int> unchecked_;  // leased by another run when the checks began
    std::vector<bool> sick_retried_;  // per job: it ran again once for a sick device
    // Under Slurm, per node: the GPUs checked and not failed on since, in order.
    std::map<std::string, std::vector<int>, std::less<>> trusted_;
    std::vector<NodeDevice> sick_on_nodes_;
    std::optional<Escapees> escapees_;
    // The jobs that need no device, slot or port, in file order, and the
    // first of them that may still wait: they wait for -j alone, never
    // behind a head that waits for devices.
    std::vector<std::size_t> unplaced_;
    std::size_t unplaced_next_ = 0;
    std::size_t launches_ = 0;
    std::size_t steps_launched_ = 0;
    // The steps Slurm had created when last asked (squeue -s), and when.
    std::vector<std::string> created_;
    Clock::time_point created_at_{};
    Clock::time_point began_;
    std::optional<Clock::time_point> run_deadline_;
    bool run_timed_out_ = false;
    bool stopping_ = false;
    bool force_kill_ = false;
    int stopped_by_signal_ = 0;
    std::size_t finished_ = 0;
    bool throttled_ = false;
    bool throttle_notice_given_ = false;
    // The job last said to wait for another run's lease, and for what.
    std::optional<std::size_t> waiting_job_;
    std::string waiting_for_;
};

}  // namespace pto::runner
