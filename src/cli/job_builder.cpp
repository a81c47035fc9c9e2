#include "cli/job_builder.hpp"

#include <algorithm>

#include <pto/devices.hpp>

#include "cli/slurm.hpp"
#include "devices/leases.hpp"

namespace pto::cli {

std::vector<Job> build_jobs(std::span<const cmdfile::JobSpec> specs, const JobWorld& world)
{
    std::vector<Job> jobs;
    jobs.reserve(specs.size());
    for (const auto& spec : specs) {
        Job job;
        job.label = spec.label;
        job.device_count = static_cast<std::size_t>(spec.devices);
        job.timeout_s = spec.timeout_s;
        job.seq = spec.seq;
        job.line = spec.line;
        job.command = spec.command;
        job.port_count = static_cast<std::size_t>(spec.ports);
        job.slots = static_cast<std::size_t>(spec.slots);
        job.retries = static_cast<std::size_t>(spec.retries.value_or(world.retries));
        if (!world.slurm_self.empty()) {
            // The ids are Slurm's to pick: the step replaces the placeholders.
            job.build = [&spec, &world](std::span<const int>) -> Expected<LaunchSpec> {
                LaunchSpec launch;
                launch.argv = step_command(world.slurm_self, world.kill_grace_s, world.shell, spec.command,
                                            world.device_env, world.step_check);
                launch.env = {"PTO_PAR_LABEL=" + spec.label, "PTO_PAR_SEQ=" + std::to_string(spec.seq)};
                return launch;
            };
            jobs.push_back(std::move(job));
            continue;
        }
        job.build = [&spec, &world](const Allocation& held) -> Expected<LaunchSpec> {
            const std::span<const int> ids = held.devices;
            const std::string list = format_device_list(ids);
            const std::string first_port = held.ports.empty() ? "" : std::to_string(held.ports.front());
            const cmdfile::Placeholders values{format_device_range(ids), list,       std::to_string(ids.size()),
                                               spec.label,                std::to_string(spec.seq), first_port};
            std::string command = cmdfile::expand_placeholders(spec.command, values);
            if (command.size() >= cmdfile::max_command_bytes)
                return fail("the command is " + std::to_string(command.size()) +
                            " bytes once its placeholders are replaced; the kernel takes at most " +
                            std::to_string(cmdfile::max_command_bytes - 1));
            LaunchSpec launch;
            launch.argv = {world.shell, "-c", std::move(command)};
            const DiscoveredPool& pool = *world.pool;
            const bool named = !pool.entries.empty();
            // The pool's own variable narrowed (not -e none): a run inside
            // the job narrows it again for its jobs, as this one did.
            const bool narrowed = !pool.narrowed.empty() && std::find(world.device_env.begin(), world.device_env.end(),
                                                                      pool.narrowed) != world.device_env.end();
            launch.env = {
                "PTO_PAR_DEVICES=" + list,
                "PTO_PAR_NUM_DEVICES=" + std::to_string(ids.size()),
                "PTO_PAR_LABEL=" + spec.label,
                "PTO_PAR_SEQ=" + std::to_string(spec.seq),
                // What a pto-par inside the job needs to find these very
                // devices in the form this run was given them.
                std::string(device_names_variable) + "=" + (named ? pool.value_for(pool.variable, ids) : ""),
                std::string(device_variable_variable) + "=" + (named ? pool.variable : narrowed ? pool.narrowed : ""),
            };
            for (const auto& name : world.device_env)
                launch.env.push_back(name + "=" + pool.value_for(name, ids));
            if (narrowed)
                launch.env.insert(launch.env.end(), pool.also_set.begin(), pool.also_set.end());
            if (!world.lock_dir.empty())
                launch.env.push_back(std::string(leases::lock_dir_variable) + "=" + world.lock_dir);
            if (!held.ports.empty()) {
                launch.env.push_back("PTO_PAR_PORT=" + first_port);
                launch.env.push_back("PTO_PAR_PORTS=" + first_port + "-" + std::to_string(held.ports.back()));
                // torch.distributed's rendezvous reads it: the job's own port, never another job's.
                launch.env.push_back("MASTER_PORT=" + first_port);
            }
            return launch;
        };
        jobs.push_back(std::move(job));
    }
    return jobs;
}

}  // namespace pto::cli
