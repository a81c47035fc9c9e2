#include "cli/plan_run.hpp"

#include <iostream>

#include "plan/plan.hpp"

namespace pto::cli {

// `all` is taken by value: the chosen jobs are moved out of it, so that a
// large file is held once, not twice.
Expected<Planned> plan_run(const Options& opt, std::vector<cmdfile::JobSpec> all)
{
    std::vector<std::string> notes;
    auto history = plan::read_history(opt.history, notes);
    if (!history)
        return tl::unexpected(history.error());
    std::vector<std::size_t> chosen(all.size());
    for (std::size_t i = 0; i < all.size(); ++i)
        chosen[i] = i;
    Planned p;
    if (opt.shard) {
        chosen = plan::shard_jobs(all, *history, *opt.shard);
        p.description += ", shard " + std::to_string(opt.shard->k) + "/" + std::to_string(opt.shard->n) + " (" +
                         std::to_string(chosen.size()) + " of " + std::to_string(all.size()) + " jobs, " +
                         (plan::expected_durations(all, *history) ==
                                  std::vector<std::optional<double>>(all.size())
                              ? "by position)"
                              : "balanced by history)");
    }
    if (!opt.rerun_failed.empty()) {
        auto last_run = plan::read_last_run(opt.rerun_failed, notes);
        if (!last_run)
            return tl::unexpected(last_run.error());
        const std::size_t before = chosen.size();
        chosen = plan::failed_jobs(all, chosen, *last_run);
        p.description += ", re-running " + std::to_string(chosen.size()) + " of " + std::to_string(before) +
                         " jobs that did not pass in " + opt.rerun_failed;
    }
    for (const auto& n : notes)
        std::cerr << "pto-par: note: " << n << "\n";
    chosen = plan::order_jobs(all, std::move(chosen), *history, opt.order);
    if (opt.order == plan::Order::longest)
        p.description += ", longest first";
    const auto expected = plan::expected_durations(all, *history);
    p.specs.reserve(chosen.size());
    p.expected.reserve(chosen.size());
    for (std::size_t i : chosen) {
        p.specs.push_back(std::move(all[i]));  // each index once
        p.expected.push_back(expected[i]);
    }
    return p;
}

}  // namespace pto::cli
