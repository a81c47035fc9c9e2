#include "runner/environment.hpp"

#include <cstring>

extern char** environ;

namespace pto::runner {
namespace {

std::string_view name_of(std::string_view entry)
{
    return entry.substr(0, entry.find('='));
}

bool overridden(std::string_view name, std::span<const std::string> overrides)
{
    for (const auto& o : overrides)
        if (name_of(o) == name)
            return true;
    return false;
}

}  // namespace

Environment::Environment()
{
    take(environ);
}

Environment::Environment(char* const* envp)
{
    take(envp);
}

void Environment::take(char* const* envp)
{
    for (char* const* e = envp; e != nullptr && *e != nullptr; ++e) {
        storage_.emplace_back(*e);
        // The first one, as getenv() and execvp() see it.
        if (path_.empty() && std::strncmp(*e, "PATH=", 5) == 0)
            path_ = *e + 5;
    }
    inherited_.reserve(storage_.size());
    for (auto& entry : storage_)
        inherited_.push_back(entry.data());
}

std::vector<char*> Environment::block(std::span<const std::string> overrides) const
{
    std::vector<char*> out;
    out.reserve(inherited_.size() + overrides.size() + 1);
    for (char* entry : inherited_)
        if (!overridden(name_of(entry), overrides))
            out.push_back(entry);
    for (const auto& o : overrides)
        out.push_back(const_cast<char*>(o.c_str()));  // execve's signature, never written
    out.push_back(nullptr);
    return out;
}

}  // namespace pto::runner
