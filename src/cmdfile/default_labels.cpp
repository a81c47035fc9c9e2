#include "cmdfile/default_labels.hpp"

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_set>

#include "cmdfile/spaces.hpp"

namespace pto::cmdfile {
namespace {

constexpr std::size_t default_label_max_bytes = 48;

std::vector<std::string_view> split_words(std::string_view s) {
    constexpr std::string_view punct = "\"'();&|<>`";
    std::vector<std::string_view> words;
    std::size_t i = skip_spaces(s, 0);
    while (i < s.size()) {
        std::size_t end = i;
        while (end < s.size() && !is_space(s[end])) ++end;
        std::string_view w = s.substr(i, end - i);
        while (!w.empty() && punct.find(w.front()) != std::string_view::npos)
            w.remove_prefix(1);
        while (!w.empty() && punct.find(w.back()) != std::string_view::npos)
            w.remove_suffix(1);
        if (!w.empty()) words.push_back(w);
        i = skip_spaces(s, end);
    }
    return words;
}

bool is_alpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_assignment(std::string_view w) {
    const std::size_t eq = w.find('=');
    if (eq == std::string_view::npos || eq == 0 || is_digit(w.front())) return false;
    return std::all_of(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(eq),
                       [](char c) { return is_alpha(c) || is_digit(c) || c == '_'; });
}

bool looks_like_file(std::string_view w) {
    if (w.starts_with('-')) return false;
    if (w.find('/') != std::string_view::npos) return true;
    for (std::size_t i = 0; i + 1 < w.size(); ++i)
        if (w[i] == '.' && is_alpha(w[i + 1])) return true;
    return false;
}

std::string_view basename(std::string_view w) {
    while (!w.empty() && w.back() == '/') w.remove_suffix(1);
    const std::size_t slash = w.rfind('/');
    return slash == std::string_view::npos ? w : w.substr(slash + 1);
}

std::string safe_name(std::string_view w) {
    std::string out(w.substr(0, default_label_max_bytes));
    for (char& c : out)
        if (!is_alpha(c) && !is_digit(c) && c != '.' && c != '_' && c != '+' && c != '-')
            c = '_';
    return out.empty() ? "job" : out;
}

std::string default_label_base(std::string_view command) {
    std::vector<std::string_view> words = split_words(command);
    words.erase(words.begin(),
                std::find_if_not(words.begin(), words.end(), is_assignment));
    if (words.empty()) return "job";
    // The program's arguments first: in "examples/fake_pytest tests/test_add.py"
    // the test file says more than the runner does.
    const auto arg = std::find_if(words.begin() + 1, words.end(), looks_like_file);
    return safe_name(basename(arg != words.end() ? *arg : words.front()));
}

}  // namespace

void assign_default_labels(std::vector<JobSpec>& jobs) {
    std::unordered_set<std::string> taken;
    for (const JobSpec& j : jobs)
        if (j.label_given) taken.insert(j.label);
    for (JobSpec& j : jobs) {
        if (j.label_given) continue;
        std::string name = default_label_base(j.command);
        const std::string suffix = "-" + std::to_string(j.seq);
        while (taken.contains(name)) name += suffix;
        taken.insert(name);
        j.label = std::move(name);
    }
}

}  // namespace pto::cmdfile
