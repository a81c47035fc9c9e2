#include "cli/plan_run.hpp"

#include <sys/stat.h>

#include <iostream>
#include <set>

#include "plan/plan.hpp"

namespace pto::cli {

namespace {

// Two names of one file, as `r.json` and `./r.json` are; false when either
// cannot be looked at (the --json file not made yet).
bool same_file(const std::string& a, const std::string& b)
{
    struct stat sa {};
    struct stat sb {};
    return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

}  // namespace

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
        const std::vector<std::size_t> before = chosen;
        chosen = plan::failed_jobs(all, chosen, last_run->history);
        p.description += ", re-running " + std::to_string(chosen.size()) + " of " + std::to_string(before.size()) +
                         " jobs that did not pass in " + opt.rerun_failed;
        if (!opt.json_path.empty() && same_file(opt.json_path, opt.rerun_failed)) {
            // Rewritten with only the jobs run again, the report would make
            // the next run of the same command repeat every other job.
            const std::set<std::size_t> again(chosen.begin(), chosen.end());
            std::vector<std::string> passed;
            for (const std::size_t i : before)
                if (again.count(i) == 0)
                    passed.push_back(all[i].label);
            p.kept_records = plan::last_records(last_run->text, passed);
            p.description += "; the report keeps the last records of the " + std::to_string(passed.size()) +
                             " that passed";
        }
    }
    if (!history->empty()) {
        std::vector<std::string> changed;
        (void)plan::match_history(all, *history, &changed);
        if (!changed.empty())
            notes.push_back(std::to_string(changed.size()) + " label" + (changed.size() == 1 ? "" : "s") +
                            " of the history now name another command (first: '" + changed.front() +
                            "'); such a job takes the record of its command where one record has it, else none");
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
