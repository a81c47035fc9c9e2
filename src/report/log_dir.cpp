#include "report/log_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>

#include <pto/devices.hpp>

#include "report/fd_writer.hpp"
#include "report/status_lines.hpp"

namespace pto::report {

std::string safe_file_name(std::string_view label)
{
    std::string name;
    name.reserve(std::min(label.size(), max_log_name));
    for (const char c : label.substr(0, max_log_name)) {
        const bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                          c == '_' || c == '+' || c == '-';
        name += keep ? c : '_';
    }
    // No hidden files, and so never "." or ".."; an empty name is no name.
    if (name.empty() || name.front() == '.')
        name.insert(name.begin(), '_');
    if (name.size() > max_log_name)
        name.resize(max_log_name);
    return name;
}

std::vector<std::string> log_file_names(std::span<const Job> jobs)
{
    std::vector<std::string> names(jobs.size());
    std::map<std::string, int> uses;
    for (std::size_t i = 0; i < jobs.size(); ++i)
        ++uses[names[i] = safe_file_name(jobs[i].label)];

    // A label kept as it was keeps its name (labels are unique, so these
    // do not collide), and the ones that had to change give way.
    std::set<std::string> taken;
    std::vector<std::size_t> renamed;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        const bool keeps = names[i] == jobs[i].label || uses[names[i]] == 1;
        // insert() also catches labels given twice, should a caller do that.
        if (!keeps || !taken.insert(names[i]).second)
            renamed.push_back(i);
    }
    for (const std::size_t i : renamed) {
        const std::string suffix = "-" + std::to_string(jobs[i].seq);
        std::string candidate = names[i] + suffix;
        // Another job may really be called "a_b-2": keep extending until free.
        while (taken.count(candidate) != 0)
            candidate += suffix;
        taken.insert(candidate);
        names[i] = std::move(candidate);
    }
    for (auto& n : names)
        n += ".log";
    return names;
}

LogDir::LogDir(std::string dir, std::span<const Job> jobs)
    : dir_(std::move(dir)), names_(log_file_names(jobs))
{
}

std::string LogDir::path_for(std::size_t index) const
{
    if (index >= names_.size())
        return {};
    return dir_ + (!dir_.empty() && dir_.back() == '/' ? "" : "/") + names_[index];
}

Expected<void> LogDir::open()
{
    if (dir_.empty())
        return fail("log directory: the name is empty");
    const auto open_dir = [this] { return ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); };
    int fd = open_dir();
    if (fd < 0 && errno == ENOENT) {
        // mkdir -p: each missing ancestor in turn; existing ones are fine.
        for (std::size_t pos = dir_.find('/', 1);; pos = dir_.find('/', pos + 1)) {
            const std::string prefix = dir_.substr(0, pos);
            if (mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST)
                return tl::unexpected(sys_error("cannot create log directory '" + prefix + "'", errno));
            if (pos == std::string::npos)
                break;
        }
        fd = open_dir();
    }
    if (fd < 0)
        return tl::unexpected(sys_error("cannot open log directory '" + dir_ + "'", errno));
    dir_fd_ = UniqueFd(fd);
    return {};
}

void LogDir::failed(std::size_t index, const char* what, int err)
{
    if (!error_)
        error_ = sys_error(std::string(what) + " log file '" + path_for(index) + "'", err);
}

int LogDir::create(std::size_t index)
{
    const std::string& name = names_[index];
    // Replace the entry rather than truncate what is there: a symlink or a
    // hard link planted under this name must not let us write outside DIR.
    if (unlinkat(dir_fd_.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
        failed(index, "cannot replace", errno);
        return -1;
    }
    const int fd = openat(dir_fd_.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0)
        failed(index, "cannot create", errno);
    return fd;
}

bool LogDir::write_output(std::size_t index, int fd, const JobOutput& output, char& last)
{
    int write_errno = 0;
    const auto walked = output.for_each_chunk([&](std::string_view chunk) {
        if (write_all(fd, chunk)) {
            if (!chunk.empty())
                last = chunk.back();
            return true;
        }
        write_errno = errno;
        return false;
    });
    if (write_errno != 0) {
        failed(index, "cannot write", write_errno);
        return false;
    }
    if (!walked && !error_)
        error_ = Error{"log file '" + path_for(index) + "' is incomplete: " + walked.error().message,
                       walked.error().sys_errno};
    return static_cast<bool>(walked);
}

namespace {

// "[pto-par] try 1 of 3: FAIL label exit=1 0.01s devices=0", the try's own
// verdict (PASS for the try that passed, whatever the job's), on a line of
// its own after whatever the try before left unended.
std::string try_header(const Job& job, const JobResult& r, std::size_t number, char last)
{
    JobResult shown = r;
    if (shown.status == JobStatus::flaky)
        shown.status = JobStatus::passed;
    std::string line = format_finish_line(shown);
    line.insert(std::string_view("[pto-par] ").size(),
                "try " + std::to_string(number) + " of " + std::to_string(tries(job, r)) + ": ");
    return (last == '\n' ? "" : "\n") + line;
}

}  // namespace

void LogDir::on_retry(const Job& job, const JobResult& r, const JobOutput& output)
{
    if (!dir_fd_ || r.index >= names_.size())
        return;
    auto at = retried_.find(r.index);
    if (at == retried_.end()) {
        const int fd = create(r.index);
        if (fd < 0)
            return;
        at = retried_.emplace(r.index, Open{UniqueFd(fd), '\n'}).first;
    }
    // on_retry comes after the try joined `attempts`.
    std::string header = try_header(job, r, r.attempts.size(), at->second.last);
    const auto& sick = r.attempts.back().sick;
    if (!sick.empty()) {
        header.pop_back();
        header += " (device" + std::string(sick.size() == 1 ? " " : "s ") + format_device_range(sick) +
                  " failed the health check)\n";
    }
    if (!write_all(at->second.fd.get(), header)) {
        failed(r.index, "cannot write", errno);
        retried_.erase(at);
        return;
    }
    at->second.last = '\n';
    if (!write_output(r.index, at->second.fd.get(), output, at->second.last))
        retried_.erase(at);
}

void LogDir::on_finish(const Job& job, const JobResult& r, const JobOutput& output)
{
    if (!dir_fd_ || r.index >= names_.size())
        return;
    int fd = -1;
    char last = '\n';
    if (auto at = retried_.find(r.index); at != retried_.end()) {
        fd = at->second.fd.release();
        last = at->second.last;
        retried_.erase(at);
    } else if ((fd = create(r.index)) < 0) {
        return;
    }
    // The earlier tries are in the file unless writing them failed (error_
    // says so); the last one goes in all the same.
    if (r.attempts.empty() || write_all(fd, try_header(job, r, r.attempts.size() + 1, last)))
        write_output(r.index, fd, output, last);
    else
        failed(r.index, "cannot write", errno);
    // Delayed write-back errors (NFS, a full thin volume) surface at close.
    if (::close(fd) != 0)
        failed(r.index, "cannot write", errno);
}

}  // namespace pto::report
