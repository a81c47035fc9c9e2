#include "runner/environment.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "runner/direct_exec.hpp"

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

// As dash sees it: only a NAME=VALUE entry sets NAME.
bool set_by(std::string_view name, std::span<const std::string> overrides)
{
    for (const auto& o : overrides)
        if (o.size() > name.size() && o[name.size()] == '=' && o.compare(0, name.size(), name) == 0)
            return true;
    return false;
}

// dash's own default when PATH is not in its environment (var.c, defpathvar).
constexpr std::string_view dash_default_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Variables dash sets at start-up over whatever was exported (var.c, INIT),
// and PWD, which it computes: an override of one of them is not copied.
constexpr std::string_view sh_owned[] = {"IFS", "OPTIND", "PPID", "PWD"};

bool same_file(const char* a, const char* b)
{
    struct stat sa {};
    struct stat sb {};
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
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
    model_sh();
}

// What dash does to its environment before running a command (dash 0.5.12,
// var.c INIT): imports only NAME=VALUE entries whose NAME is a shell name,
// the last of duplicates winning; resets IFS, OPTIND and PPID (exported if
// they were); keeps PWD if it names the current directory, else uses
// getcwd(), and exports it.
void Environment::model_sh()
{
    if (!sh_is_dash())
        return;
    std::unordered_map<std::string_view, std::size_t> at;  // name -> position in sh_inherited_
    std::string_view pwd;
    bool has_pwd = false;
    bool has_path = false;
    for (char* entry : inherited_) {
        const std::string_view e(entry);
        const auto eq = e.find('=');
        if (eq == std::string_view::npos || !is_shell_name(e.substr(0, eq)))
            continue;
        const auto name = e.substr(0, eq);
        const auto [it, fresh] = at.try_emplace(name, sh_inherited_.size());
        if (fresh)
            sh_inherited_.push_back(entry);
        else
            sh_inherited_[it->second] = entry;
        if (name == "PWD") {
            pwd = e.substr(eq + 1);
            has_pwd = true;
        } else if (name == "PATH") {
            sh_path_ = e.substr(eq + 1);
            has_path = true;
        }
    }
    if (!has_path)
        sh_path_ = dash_default_path;
    // A PATH entry ending in %func or %builtin means something to dash only.
    if (sh_path_.find('%') != std::string::npos)
        return;

    std::string pwd_value;
    if (has_pwd && !pwd.empty() && pwd.front() == '/' && same_file(std::string(pwd).c_str(), "."))
        pwd_value = pwd;
    else {
        std::vector<char> buf(4096);
        while (getcwd(buf.data(), buf.size()) == nullptr) {
            if (errno != ERANGE)
                return;  // no current directory to name: leave such a run to the shell
            buf.resize(buf.size() * 2);
        }
        pwd_value = buf.data();
    }

    // Owned strings first, pointers taken once none will move any more.
    sh_storage_.reserve(4);
    std::vector<std::pair<std::string_view, std::size_t>> set;  // name -> index in sh_storage_
    const auto put = [&](std::string_view name, std::string value) {
        sh_storage_.push_back(std::string(name) + "=" + value);
        set.emplace_back(name, sh_storage_.size() - 1);
    };
    for (const auto name : {std::string_view("IFS"), std::string_view("OPTIND"), std::string_view("PPID")}) {
        if (!at.contains(name))
            continue;
        if (name == "IFS")
            put(name, " \t\n");
        else if (name == "OPTIND")
            put(name, "1");
        else
            put(name, std::to_string(getpid()));  // the shell's parent would be us
    }
    put("PWD", pwd_value);
    for (const auto& [name, index] : set) {
        char* entry = sh_storage_[index].data();
        const auto found = at.find(name);
        if (found != at.end())
            sh_inherited_[found->second] = entry;
        else
            sh_inherited_.push_back(entry);
    }
    sh_emulated_ = true;
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

std::optional<std::string_view> Environment::sh_path_for(std::span<const std::string> overrides) const
{
    if (!sh_emulated_)
        return std::nullopt;
    std::string_view path = sh_path_;
    for (const auto& o : overrides) {
        const auto name = name_of(o);
        for (const auto owned : sh_owned)
            if (name == owned)
                return std::nullopt;
        if (name == "PATH" && o.size() > name.size()) {
            path = std::string_view(o).substr(name.size() + 1);
            if (path.find('%') != std::string_view::npos)
                return std::nullopt;
        }
    }
    return path;
}

std::vector<char*> Environment::sh_block(std::span<const std::string> overrides) const
{
    std::vector<char*> out;
    out.reserve(sh_inherited_.size() + overrides.size() + 1);
    for (char* entry : sh_inherited_)
        if (!set_by(name_of(entry), overrides))
            out.push_back(entry);
    for (std::size_t i = 0; i < overrides.size(); ++i) {
        const auto name = name_of(overrides[i]);
        // dash drops what is not NAME=VALUE with a shell name, and of two
        // entries with one name keeps the last.
        if (name.size() == overrides[i].size() || !is_shell_name(name) || set_by(name, overrides.subspan(i + 1)))
            continue;
        out.push_back(const_cast<char*>(overrides[i].c_str()));  // execve's signature, never written
    }
    out.push_back(nullptr);
    return out;
}

}  // namespace pto::runner
