// The environment block a job starts with: the caller's environment, taken
// once per run, with each job's own NAME=VALUE entries put over it. Only
// pointers are copied per job, never the strings of the inherited block.
#pragma once

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

private:
    void take(char* const* envp);

    std::vector<std::string> storage_;  // owned copies: setenv() later cannot pull them away
    std::vector<char*> inherited_;
    std::string path_;
};

}  // namespace pto::runner
