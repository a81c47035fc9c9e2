#include "runner/direct_exec.hpp"

#include <climits>
#include <cstdlib>
#include <memory>

namespace pto::runner {
namespace {

// Bytes that are never special to the shell in any position of a word
// (checked against dash's parser: none starts a quote, an expansion, a glob,
// a redirection, a comment, a tilde or a control operator). Deliberately
// ASCII only: `=`, blanks and everything else are handled apart or refused.
bool is_word_byte(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    switch (c) {
    case '_': case '-': case '.': case '/': case ',': case ':': case '+': case '@': case '%':
        return true;
    default:
        return false;
    }
}

// dash 0.5.12's builtins (`type NAME` says "shell builtin") and reserved
// words, plus bash's, so that a /bin/sh that is bash one day would still be
// safe. A builtin may differ from the program of the same name (`echo -e`,
// `kill -l`, `pwd` with a symlinked $PWD), and a reserved word is syntax.
constexpr std::string_view shell_words[] = {
    // dash builtins
    ".", ":", "[", "alias", "bg", "break", "cd", "chdir", "command", "continue", "echo", "eval", "exec",
    "exit", "export", "false", "fc", "fg", "getopts", "hash", "jobs", "kill", "local", "printf", "pwd",
    "read", "readonly", "return", "set", "shift", "test", "times", "trap", "true", "type", "ulimit",
    "umask", "unalias", "unset", "wait",
    // reserved words
    "!", "{", "}", "case", "do", "done", "elif", "else", "esac", "fi", "for", "if", "in", "then", "until",
    "while",
    // bash only
    "[[", "]]", "builtin", "caller", "coproc", "declare", "dirs", "disown", "enable", "function", "help",
    "history", "let", "logout", "mapfile", "popd", "pushd", "readarray", "select", "shopt", "source",
    "suspend", "time", "typeset",
};

bool is_shell_word(std::string_view w)
{
    for (auto s : shell_words)
        if (w == s)
            return true;
    return false;
}

}  // namespace

bool is_shell_name(std::string_view name)
{
    if (name.empty() || (name[0] >= '0' && name[0] <= '9'))
        return false;
    for (const char c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
            return false;
    return true;
}

std::optional<std::vector<std::string>> plain_command_words(std::string_view line)
{
    std::vector<std::string> words;
    std::size_t i = 0;
    while (i < line.size()) {
        const char c = line[i];
        if (c == ' ' || c == '\t') {
            ++i;
            continue;
        }
        const std::size_t start = i;
        for (; i < line.size() && line[i] != ' ' && line[i] != '\t'; ++i) {
            const auto b = static_cast<unsigned char>(line[i]);
            // `=` in the first word would make it an assignment (NAME=VALUE
            // cmd); after it, `--opt=value` is a plain word.
            if (!is_word_byte(b) && !(b == '=' && !words.empty()))
                return std::nullopt;
        }
        words.emplace_back(line.substr(start, i - start));
    }
    if (words.empty())
        return std::nullopt;  // nothing to run: the shell exits 0 for us
    const std::string& first = words.front();
    // A word with a '/' is always a path to dash, never a builtin.
    if (first.find('/') == std::string::npos && is_shell_word(first)) {
        // `true` and `false` alone: /usr/bin/true and the builtin agree (only
        // `--help`/`--version` would tell them apart).
        const bool alone = words.size() == 1 && (first == "true" || first == "false");
        if (!alone)
            return std::nullopt;
    }
    return words;
}

bool sh_is_dash()
{
    // realpath follows /bin/sh -> dash (and /bin -> usr/bin); busybox, bash
    // or anything else keeps the shell on every line.
    std::unique_ptr<char, decltype(&std::free)> real(realpath("/bin/sh", nullptr), &std::free);
    if (!real)
        return false;
    const std::string_view path(real.get());
    const auto slash = path.rfind('/');
    return path.substr(slash == std::string_view::npos ? 0 : slash + 1) == "dash";
}

}  // namespace pto::runner
