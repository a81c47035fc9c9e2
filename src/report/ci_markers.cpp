#include "report/ci_markers.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <pto/devices.hpp>

#include "common/signal_names.hpp"
#include "common/text.hpp"

namespace pto::report {
namespace {

std::string escape(std::string_view s, bool property)
{
    std::string out;
    for (char c : s) {
        switch (c) {
        case '%': out += "%25"; break;
        case '\r': out += "%0D"; break;
        case '\n': out += "%0A"; break;
        case ':':
            out += property ? "%3A" : ":";
            break;
        case ',':
            out += property ? "%2C" : ",";
            break;
        default: out += c;
        }
    }
    return out;
}

// GitLab's section names: letters, digits and _.- only.
std::string section_name(const Job& job, std::string_view token)
{
    return "pto_par_" + std::string(token) + "_" + std::to_string(job.seq);
}

const char* verdict_word(JobStatus s)
{
    switch (s) {
    case JobStatus::passed: return "PASS";
    case JobStatus::flaky: return "FLAKY";
    case JobStatus::failed: return "FAIL";
    case JobStatus::timeout: return "TIMEOUT";
    case JobStatus::killed: return "KILLED";
    case JobStatus::cancelled: return "CANCEL";
    }
    return "?";
}

}  // namespace

CiKind detect_ci(const char* github_actions, const char* gitlab_ci)
{
    if (github_actions != nullptr && std::strcmp(github_actions, "true") == 0)
        return CiKind::github;
    if (gitlab_ci != nullptr && std::strcmp(gitlab_ci, "true") == 0)
        return CiKind::gitlab;
    return CiKind::none;
}

std::string github_escape_data(std::string_view s)
{
    return escape(s, false);
}

std::string github_escape_property(std::string_view s)
{
    return escape(s, true);
}

Expected<std::string> random_token()
{
    unsigned char bits[16];
    std::size_t got = 0;
    while (got < sizeof bits) {
        const ssize_t n = getrandom(bits + got, sizeof bits - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return tl::unexpected(sys_error("getrandom for the CI markers' token", errno));
        got += static_cast<std::size_t>(n);
    }
    static constexpr char hex[] = "0123456789abcdef";
    std::string token;
    for (const unsigned char b : bits) {
        token += hex[b >> 4];
        token += hex[b & 15];
    }
    return token;
}

namespace {

std::string begin_section(CiKind ci, const Job& job, const std::string& title, bool folded, std::int64_t unix_now,
                          std::string_view token)
{
    switch (ci) {
    case CiKind::none: return {};
    case CiKind::github:
        return "::group::" + github_escape_data(title) + "\n::stop-commands::" + std::string(token) + "\n";
    case CiKind::gitlab:
        // The header is shown as text: no terminal escapes from a label.
        return "\x1b[0Ksection_start:" + std::to_string(unix_now) + ":" + section_name(job, token) +
               (folded ? "[collapsed=true]" : "") + "\r\x1b[0K" + text::printable(title) + "\n";
    }
    return {};
}

}  // namespace

std::string group_begin(CiKind ci, const Job& job, const JobResult& r, std::int64_t unix_now, std::string_view token)
{
    // Passed jobs folded, the others open where the eye goes first.
    const bool passed = r.status == JobStatus::passed || r.status == JobStatus::flaky;
    return begin_section(ci, job, std::string(verdict_word(r.status)) + " " + job.label, passed, unix_now, token);
}

std::string live_group_begin(CiKind ci, const Job& job, std::int64_t unix_now, std::string_view token)
{
    return begin_section(ci, job, job.label, false, unix_now, token);
}

std::string group_end(CiKind ci, const Job& job, std::int64_t unix_now, std::string_view token)
{
    switch (ci) {
    case CiKind::none: return {};
    case CiKind::github: return "::" + std::string(token) + "::\n::endgroup::\n";
    case CiKind::gitlab:
        return "\x1b[0Ksection_end:" + std::to_string(unix_now) + ":" + section_name(job, token) + "\r\x1b[0K\n";
    }
    return {};
}

std::string annotation(CiKind ci, const JobResult& r)
{
    if (ci != CiKind::github || r.status == JobStatus::passed || r.status == JobStatus::flaky ||
        r.status == JobStatus::cancelled)
        return {};
    std::string what = verdict_word(r.status);
    if (r.signal != 0)
        what += " signal=" + signal_name(r.signal);
    else if (r.exit_code)
        what += " exit=" + std::to_string(*r.exit_code);
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", r.duration_s);
    what += std::string(" after ") + secs + "s on devices " +
            (r.devices.empty() ? std::string("none") : format_device_range(r.devices));
    if (!r.error.empty())
        what += ": " + r.error;
    return "::error title=" + github_escape_property(r.label) + "::" + github_escape_data(what) + "\n";
}

}  // namespace pto::report
