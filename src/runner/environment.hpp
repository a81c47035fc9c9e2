// The environment block a job starts with: the caller's environment, taken
// once per run, with each job's own NAME=VALUE entries put over it. Only
// pointers are copied per job, never the strings of the inherited block.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pto::runner {

class Environment {
public:
    // Snapshot of `environ` now.
    Environment();
    // Snapshot of `envp` (NULL-terminated); for tests.
    explicit Environment(char* const* envp);

    // A NULL-terminated envp for execve: the inherited entries minus those
    // named in `overrides`, then `overrides`. Valid while `overrides` and this
    // object live.
    std::vector<char*> block(std::span<const std::string> overrides) const;

    // $PATH as inherited, for looking up a program name.
    std::string_view path() const { return path_; }

    // --- what /bin/sh would hand on (see direct_exec.hpp) --------------------

    // True if a command may be execve'd directly in place of `/bin/sh -c
    // LINE`: /bin/sh is dash and nothing in the environment changes what
    // dash would do that we do not copy (exported bash functions, which a
    // bash-as-sh would import; dash's `%` PATH entries).
    bool sh_emulated() const { return sh_emulated_; }

    // The envp dash would give the command it runs: entries whose name is
    // not a shell name dropped, the last of duplicate names kept, IFS,
    // OPTIND and PPID reset if exported, PWD set (the inherited one if it
    // names the current directory, else getcwd), then `overrides` (shell
    // names only). The order may differ from dash's (which is its hash
    // table's); the set is the same.
    std::vector<char*> sh_block(std::span<const std::string> overrides) const;

    // The PATH dash would search with `overrides` on top: the last PATH
    // entry, or dash's default. nullopt when the direct path must not be
    // taken: not emulated, or an override of a variable dash sets itself
    // (IFS, OPTIND, PPID, PWD) or of PATH with dash's `%` entries.
    std::optional<std::string_view> sh_path_for(std::span<const std::string> overrides) const;

private:
    void take(char* const* envp);
    void model_sh();

    std::vector<std::string> storage_;  // owned copies: setenv() later cannot pull them away
    std::vector<char*> inherited_;
    std::string path_;

    bool sh_emulated_ = false;
    std::vector<std::string> sh_storage_;  // dash's changes: IFS, OPTIND, PPID, PWD
    std::vector<char*> sh_inherited_;
    std::string sh_path_;
};

}  // namespace pto::runner
