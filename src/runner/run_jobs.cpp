// The library's entry: the static check, the run's cgroup, its signals and
// plumbing, then the loop.
#include <pto/scheduler.hpp>

#include <fcntl.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "placement/local_devices.hpp"
#include "placement/slurm_nodes.hpp"
#include "runner/guardian.hpp"
#include "runner/run.hpp"

namespace pto {

const char* to_string(JobStatus s)
{
    switch (s) {
    case JobStatus::passed: return "passed";
    case JobStatus::failed: return "failed";
    case JobStatus::timeout: return "timeout";
    case JobStatus::killed: return "killed";
    case JobStatus::cancelled: return "cancelled";
    case JobStatus::flaky: return "flaky";
    }
    return "?";
}

namespace {

// While the run lasts, orphans of the jobs are re-parented to this process,
// so their exits wake the loop and are reaped at once.
class SubreaperScope {
public:
    SubreaperScope()
    {
        int was = 0;
        if (prctl(PR_GET_CHILD_SUBREAPER, &was) == 0 && was == 0)
            set_ = prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
    }
    ~SubreaperScope()
    {
        if (set_)
            (void)prctl(PR_SET_CHILD_SUBREAPER, 0);  // cannot fail once set
    }
    SubreaperScope(const SubreaperScope&) = delete;
    SubreaperScope& operator=(const SubreaperScope&) = delete;

private:
    bool set_ = false;
};

// No job may need more than the run can ever give: said before anything starts.
Expected<void> check_fits(const std::vector<Job>& jobs, const RunOptions& options)
{
    std::size_t most = DevicePool(options.pool).size();
    if (options.slurm) {
        most = 0;
        for (const auto& n : options.slurm->nodes)
            most = std::max(most, n.devices);
        if (options.slurm->nodes.empty())
            return fail("the Slurm allocation has no nodes");
    }
    const PortPool ports(options.port_low, options.port_high);
    for (const Job& job : jobs) {
        if (job.slots > 0 && (options.slurm || job.slots > options.device_slots))
            return fail("job '" + job.label + "' needs " + std::to_string(job.slots) + " slots of one device but " +
                        (options.slurm ? std::string("devices have no slots under Slurm")
                                       : "a device has " + std::to_string(options.device_slots)));
        if (job.device_count > most)
            return fail("job '" + job.label + "' needs " + std::to_string(job.device_count) + " devices but the " +
                        (options.slurm ? "largest node has " : "pool has ") + std::to_string(most));
        if (job.port_count > ports.size())
            return fail("job '" + job.label + "' needs " + std::to_string(job.port_count) + " ports but the range " +
                        std::to_string(options.port_low) + "-" + std::to_string(options.port_high) + " has " +
                        std::to_string(ports.size()));
    }
    return {};
}

std::unique_ptr<placement::Devices> make_devices(const RunOptions& options)
{
    if (options.slurm)
        return std::make_unique<placement::SlurmNodes>(options.slurm->nodes);
    return std::make_unique<placement::LocalDevices>(options.pool, options.device_slots);
}

}  // namespace

Expected<std::string> describe_containment(Containment mode)
{
    if (mode == Containment::process_group)
        return std::string("process groups (--contain pgroup)");
    auto dir = runner::own_cgroup_dir();
    if (dir)
        return "cgroup v2 (a cgroup per job under " + *dir + ")";
    if (mode == Containment::cgroup)
        return fail("cannot contain jobs in cgroups: " + dir.error().message);
    return "process groups (no usable cgroup v2: " + dir.error().message + ")";
}

Expected<RunSummary> run_jobs(std::vector<Job> jobs, const RunOptions& options)
{
    if (auto fits = check_fits(jobs, options); !fits)
        return tl::unexpected(fits.error());

    std::optional<runner::RunCgroup> cgroup;
    std::string cgroup_notice;
    // Under Slurm the tasks are slurmd's children; a cgroup around srun
    // would only let cgroup.kill SIGKILL srun and orphan its step.
    if (options.containment != Containment::process_group && !options.slurm) {
        auto made = runner::RunCgroup::create();
        if (made)
            cgroup = std::move(*made);
        else if (options.containment == Containment::cgroup)
            return fail("cannot contain jobs in cgroups: " + made.error().message);
        if (cgroup && cgroup->stale_stopped() > 0)
            cgroup_notice = "stopped " + std::to_string(cgroup->stale_stopped()) +
                            " processes left in its cgroups by an earlier pto-par run that was killed";
    }

    // A lent descriptor reads the caller's stop signals and status
    // requests: only a run that handles them may take them from it.
    auto signals = runner::SignalChannel::open(options.handle_signals, options.watched_signals,
                                               options.handle_signals ? options.signal_fd : -1);
    if (!signals)
        return tl::unexpected(signals.error());
    UniqueFd dev_null(open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!dev_null)
        return tl::unexpected(sys_error("open /dev/null", errno));
    // After the signals are blocked, which it keeps; not under Slurm, where
    // slurmd holds the tasks.
    std::optional<runner::Guardian> guardian;
    if (!options.slurm) {
        // Device checks are announced too, and do not count against -j: the
        // first batch is every device of the pool at once.
        std::size_t most = options.max_parallel == 0 ? jobs.size() : std::min(jobs.size(), options.max_parallel);
        if (options.device_check)
            most += DevicePool(options.pool).size();
        auto started = runner::Guardian::start(cgroup ? cgroup->path() : std::string(), most);
        if (!started)
            return tl::unexpected(started.error());
        guardian.emplace(std::move(*started));
    }
    SubreaperScope subreaper;
    const runner::Environment env;
    const runner::LaunchContext ctx{&env, dev_null.get(), guardian ? &*guardian : nullptr};
    runner::Helpers helpers(ctx);
    // Leases across runs: not under Slurm, whose nodes are Slurm's to
    // share, nor where nothing is ever leased (no two descriptors spent).
    const bool leases_needed =
        (options.device_check && !options.pool.empty()) ||
        std::any_of(jobs.begin(), jobs.end(), [](const Job& j) { return j.device_count > 0 || j.port_count > 0; });
    std::optional<leases::LockDir> locks;
    std::string lease_notice;
    if (options.lock_dir && !options.slurm && leases_needed) {
        auto opened = leases::LockDir::open(*options.lock_dir);
        if (opened) {
            locks.emplace(std::move(*opened));
            locks->on_notice([observer = options.observer](const std::string& text) {
                if (observer != nullptr)
                    observer->on_notice(text);
            });
            std::vector<std::string> inherited;
            for (const auto& d : options.inherited_devices)
                inherited.push_back(leases::device_key(d));
            for (int port : options.inherited_ports)
                inherited.push_back(leases::port_key(port));
            locks->inherit(std::move(inherited));
        } else if (!options.lock_dir->empty()) {
            return tl::unexpected(opened.error());
        } else {
            // The default place may be missing (a bare container): said,
            // and the run goes on unseen by other runs.
            lease_notice = "no leases across runs, so other runs on this machine may take the same devices and "
                           "ports: " + opened.error().message;
        }
    }
    placement::Placement placement(make_devices(options), options.port_low, options.port_high,
                                   {locks ? &*locks : nullptr, options.device_identity,
                                    [observer = options.observer](const std::string& text) {
                                        if (observer != nullptr)
                                            observer->on_notice(text);
                                    }});

    // Declared last, destroyed first: a Run that ends by an error or an
    // exception stops and reaps whatever of its jobs still runs.
    runner::Run run(jobs, options, *signals, ctx, cgroup ? &*cgroup : nullptr, helpers, placement,
                    locks ? &*locks : nullptr);
    if (!cgroup_notice.empty() && options.observer != nullptr)
        options.observer->on_notice(cgroup_notice);
    if (!lease_notice.empty() && options.observer != nullptr)
        options.observer->on_notice(lease_notice);
    if (auto ok = run.loop(); !ok)
        return tl::unexpected(ok.error());
    return run.take();
}

}  // namespace pto
