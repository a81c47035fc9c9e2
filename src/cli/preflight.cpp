#include "cli/preflight.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <vector>

#include "common/text.hpp"
#include "common/unique_fd.hpp"

namespace pto::cli {
namespace {

// Why `path` cannot be run, empty if it can.
std::string not_executable(const std::string& path)
{
    struct stat st {};
    if (stat(path.c_str(), &st) != 0)
        return std::strerror(errno);
    if (S_ISDIR(st.st_mode))
        return "it is a directory";
    if (!S_ISREG(st.st_mode))
        return "it is not a regular file";
    if (access(path.c_str(), X_OK) != 0)
        return errno == EACCES ? "it is not executable" : std::strerror(errno);
    return {};
}

// A report's destination, and how to tell whether two of them, or one and
// the input, are the same file: by inode when it exists, else by its path
// made absolute (two spellings of a file still to be created).
struct Destination {
    const char* option;
    const std::string& path;
    char first_byte;  // what a report of this kind starts with; 0 for a directory
    std::optional<std::pair<dev_t, ino_t>> identity;
    std::string canonical;
};

// `path` absolute, its symlinks resolved as far as it exists.
std::string canonical_path(const std::string& path)
{
    std::error_code ec;
    const auto abs = std::filesystem::weakly_canonical(path, ec);
    // Without a canonical form the path as given still compares equal
    // to itself, which is the common case of a repeated name.
    return ec ? path : abs.string();
}

Destination destination(const char* option, const std::string& path, char first_byte)
{
    Destination d{option, path, first_byte, std::nullopt, {}};
    struct stat st {};
    if (stat(path.c_str(), &st) == 0)
        d.identity = std::pair{st.st_dev, st.st_ino};
    else
        d.canonical = canonical_path(path);
    return d;
}

bool same(const Destination& a, const Destination& b)
{
    if (a.identity || b.identity)
        return a.identity == b.identity;
    return a.canonical == b.canonical;
}

// The first byte of an existing non-empty regular file after blanks, or
// nullopt when there is nothing to protect (missing, empty, not a file).
Expected<std::optional<char>> first_byte_of(const std::string& path)
{
    const UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (!fd)
        return std::optional<char>{};  // missing or unreadable: opening it for the report says why
    struct stat st {};
    if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
        return std::optional<char>{};
    char buf[512];
    const ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0)
        return tl::unexpected(sys_error("cannot read '" + path + "'", errno));
    const std::string_view head = text::trim(std::string_view(buf, static_cast<std::size_t>(n)));
    return head.empty() ? std::optional<char>{} : std::optional<char>{head.front()};
}

}  // namespace

Expected<void> check_shell(const std::string& shell)
{
    std::vector<std::string> candidates;
    if (shell.find('/') != std::string::npos) {
        candidates.push_back(shell);
    } else {
        const char* path = std::getenv("PATH");
        const std::string_view dirs = path != nullptr ? path : "/bin:/usr/bin";
        for (std::size_t start = 0; start <= dirs.size();) {
            std::size_t colon = dirs.find(':', start);
            if (colon == std::string_view::npos)
                colon = dirs.size();
            const std::string_view dir = dirs.substr(start, colon - start);
            candidates.push_back((dir.empty() ? std::string(".") : std::string(dir)) + "/" + shell);
            start = colon + 1;
        }
    }
    std::string why;
    for (const auto& c : candidates) {
        why = not_executable(c);
        if (why.empty())
            return {};
    }
    if (shell.find('/') == std::string::npos)
        why = "not found in $PATH";
    return fail("--shell '" + text::printable(shell) + "' cannot run the jobs: " + why);
}

Expected<void> check_reports(const Options& opt, const std::optional<std::pair<dev_t, ino_t>>& input)
{
    std::vector<Destination> dests;
    if (!opt.json_path.empty())
        dests.push_back(destination("--json", opt.json_path, '{'));
    if (!opt.junit_path.empty())
        dests.push_back(destination("--junit", opt.junit_path, '<'));
    if (!opt.log_dir.empty())
        dests.push_back(destination("--log-dir", opt.log_dir, 0));

    const std::string input_name = opt.file == "-" ? "standard input" : "'" + text::printable(opt.file) + "'";
    for (std::size_t i = 0; i < dests.size(); ++i) {
        const Destination& d = dests[i];
        const std::string named = std::string(d.option) + " '" + text::printable(d.path) + "'";
        if (input && d.identity == input)
            return fail(named + " is the commands file (read from " + input_name +
                        "); the report would overwrite it");
        for (std::size_t k = 0; k < i; ++k)
            if (same(dests[k], d))
                return fail(std::string(dests[k].option) + " and " + d.option + " both name '" +
                            text::printable(d.path) + "'; each report needs a file of its own");
        // A directory, or a stream such as /dev/stdout: nothing to mistake
        // for a report there, only a destination.
        if (d.first_byte == 0 || d.path.starts_with("/dev/") || d.path.starts_with("/proc/"))
            continue;
        auto first = first_byte_of(d.path);
        if (!first)
            return tl::unexpected(first.error());
        if (*first && **first != d.first_byte) {
            std::string message = "refusing to overwrite " + named + ": it is not empty and does not look like a " +
                                  (d.first_byte == '{' ? "JSON Lines" : "JUnit XML") + " report (which starts with '" +
                                  d.first_byte + "')";
            if (opt.file == "-")
                message += "; did you forget the report's own name, as in '" + std::string(d.option) +
                           " report" + (d.first_byte == '{' ? ".json" : ".xml") + " " + text::printable(d.path) +
                           "'? The commands were to be read from standard input";
            return fail(message);
        }
    }
    return {};
}

}  // namespace pto::cli

namespace pto::cli {

Expected<void> check_distinct_outputs(const Options& opt, const std::optional<std::pair<dev_t, ino_t>>& input,
                                      std::span<const std::string> names)
{
    struct Protected {
        std::string what;
        std::string canonical;
        std::optional<std::pair<dev_t, ino_t>> identity;
    };
    std::vector<Protected> files;
    const auto add = [&files](std::string what, const std::string& path) {
        Protected p{std::move(what), canonical_path(path), std::nullopt};
        struct stat st {};
        if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
            p.identity = std::pair{st.st_dev, st.st_ino};
        files.push_back(std::move(p));
    };
    if (opt.file != "-")
        add("the commands file", opt.file);
    if (!opt.json_path.empty())
        add("the --json report", opt.json_path);
    if (!opt.junit_path.empty())
        add("the --junit report", opt.junit_path);
    for (const auto& h : opt.history) {
        add("the --history file", h);
        if (!opt.junit_path.empty() && files[files.size() - 1].canonical == canonical_path(opt.junit_path))
            return fail("--junit '" + text::printable(opt.junit_path) + "' is the --history file; the report would overwrite it");
    }
    if (opt.log_dir.empty() || names.empty())
        return {};
    const std::string dir = canonical_path(opt.log_dir);
    const UniqueFd dir_fd(open(opt.log_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    for (const auto& name : names) {
        const std::string path = dir + "/" + name;
        std::optional<std::pair<dev_t, ino_t>> identity;
        struct stat st {};
        // Only an existing entry can be another file under this name.
        if (dir_fd && fstatat(dir_fd.get(), name.c_str(), &st, 0) == 0)
            identity = std::pair{st.st_dev, st.st_ino};
        for (const auto& f : files)
            if (f.canonical == path || (identity && f.identity == identity))
                return fail("--log-dir file '" + text::printable(opt.log_dir + "/" + name) + "' is " + f.what +
                            "; a job's log would overwrite it (rename the job's label or choose another --log-dir)");
        // The commands file read from standard input has only its inode.
        if (identity && identity == input)
            return fail("--log-dir file '" + text::printable(opt.log_dir + "/" + name) +
                        "' is the commands file; a job's log would overwrite it");
    }
    return {};
}

}  // namespace pto::cli
