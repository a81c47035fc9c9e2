// The markers CI log pages understand, so that each job's output folds into
// a section of its own and a job that did not pass is flagged: GitHub
// Actions' workflow commands (`::group::`, `::error`), GitLab's collapsible
// sections. Pure formatting.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <pto/scheduler.hpp>

namespace pto::report {

enum class CiKind { none, github, gitlab };

// --ci auto: from the variables the CI systems set.
CiKind detect_ci(const char* github_actions, const char* gitlab_ci);

// GitHub's escaping of a command's message (% CR LF) and of a property
// value (those and : ,), so that no label can end a command early or start
// another.
std::string github_escape_data(std::string_view s);
std::string github_escape_property(std::string_view s);

// 128 random bits in hex (getrandom), made once per run: the token of
// GitHub's ::stop-commands:: and part of GitLab's section names, so that no
// job can guess it and end pto-par's markers early or switch them off.
Expected<std::string> random_token();

// The lines around a job's output block. `unix_now` is the time stamp
// GitLab wants; the section is named from `token` and the job's seq. On
// GitHub the block is inside ::stop-commands::TOKEN ... ::TOKEN::, so that
// nothing the job prints (::endgroup::, ::error, ::stop-commands::) is a
// command to the runner.
std::string group_begin(CiKind ci, const Job& job, const JobResult& r, std::int64_t unix_now, std::string_view token);
std::string group_end(CiKind ci, const Job& job, std::int64_t unix_now, std::string_view token);
// The start of a live block, written before the job's verdict is known:
// titled with the label alone, and never folded.
std::string live_group_begin(CiKind ci, const Job& job, std::int64_t unix_now, std::string_view token);

// An annotation for a job that did not pass, empty for one that did (and
// for CIs without annotations): `::error title=LABEL::FAIL exit=1 after 3.2s
// on devices 2-3`.
std::string annotation(CiKind ci, const JobResult& r);

}  // namespace pto::report
