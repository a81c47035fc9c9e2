// The commands file parser. One pass over the text builds logical lines
// (continuations joined, comments and blanks dropped), each logical line
// becomes a job or a set of diagnostics, and default labels are chosen at the
// end, when every explicit label of the file is known.
#include "cmdfile/commands_file.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <limits>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "cmdfile/default_labels.hpp"
#include "cmdfile/spaces.hpp"
#include "common/seconds.hpp"

namespace pto::cmdfile {
namespace {

// A compiler that prints hundreds of errors for one bad file helps nobody.
constexpr std::size_t max_errors = 20;
// Device ids go up to 65535 (SPEC 2), so no pool can hold more than this.
constexpr long max_devices = 65536;

constexpr std::string_view utf8_bom = "\xEF\xBB\xBF";

bool is_control(char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
}

std::string_view trim_right(std::string_view s) {
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

// Blank and comment lines never make a job.
bool is_skippable(std::string_view s) {
    const std::size_t i = skip_spaces(s, 0);
    return i == s.size() || s[i] == '#';
}

// Like sh: "a\\" is a literal backslash, "a\\\" a literal one plus a
// continuation. Only an odd run of trailing backslashes continues the line.
bool continues(std::string_view s) {
    std::size_t n = 0;
    while (n < s.size() && s[s.size() - 1 - n] == '\\') ++n;
    return n % 2 == 1;
}

// Text quoted in a message: control bytes escaped so that a stray byte
// cannot garble the terminal, and long text shortened, because a 100 KiB
// "key" is still an error worth one line.
std::string quote(std::string_view s) {
    constexpr std::size_t max_shown = 60;
    std::string out = "'";
    for (std::size_t i = 0; i < s.size() && i < max_shown; ++i) {
        if (is_control(s[i])) {
            std::array<char, 5> buf{};
            std::snprintf(buf.data(), buf.size(), "\\x%02x",
                          static_cast<unsigned char>(s[i]));
            out += buf.data();
        } else {
            out += s[i];
        }
    }
    if (s.size() > max_shown) out += "...";
    out += '\'';
    return out;
}

class ErrorList {
public:
    void add(std::size_t line, std::size_t col, std::string message) {
        if (full()) return;
        if (errors_.size() == max_errors) message = "too many errors, stopping";
        errors_.push_back({line, col, std::move(message)});
    }
    bool full() const { return errors_.size() > max_errors; }
    bool empty() const { return errors_.empty(); }
    std::vector<Diagnostic> take() { return std::move(errors_); }

private:
    std::vector<Diagnostic> errors_;
};

struct PhysicalLine {
    std::string_view text;  // without the line break and one trailing '\r'
    std::size_t line;
    std::size_t first_col;  // column of text[0]; 4 after a byte order mark
};

class LineReader {
public:
    explicit LineReader(std::string_view text) : text_(text) {
        // Editors that write CRLF often write a BOM too; it is not part of
        // the first command.
        if (text_.starts_with(utf8_bom)) pos_ = utf8_bom.size();
    }

    std::optional<PhysicalLine> next() {
        if (pos_ >= text_.size()) return std::nullopt;
        const std::size_t first_col = line_ == 0 ? pos_ + 1 : 1;
        std::size_t end = text_.find('\n', pos_);
        if (end == std::string_view::npos) end = text_.size();
        std::string_view s = text_.substr(pos_, end - pos_);
        if (s.ends_with('\r')) s.remove_suffix(1);
        pos_ = end + 1;
        return PhysicalLine{s, ++line_, first_col};
    }

private:
    std::string_view text_;
    std::size_t pos_ = 0;
    std::size_t line_ = 0;
};

// One job's text after joining continuations, with enough bookkeeping to
// report a position in the physical line the byte came from.
class LogicalLine {
public:
    void append(const PhysicalLine& p) {
        segments_.push_back({text_.size(), p.line, p.first_col});
        text_ += p.text;
    }
    void drop_last_byte() { text_.pop_back(); }

    std::string_view text() const { return text_; }
    std::size_t first_line() const { return segments_.front().line; }

    std::pair<std::size_t, std::size_t> position(std::size_t offset) const {
        auto it = std::upper_bound(
            segments_.begin(), segments_.end(), offset,
            [](std::size_t off, const Segment& s) { return off < s.offset; });
        const Segment& s = *std::prev(it);
        return {s.line, s.first_col + (offset - s.offset)};
    }

private:
    struct Segment {
        std::size_t offset;  // in text_
        std::size_t line;
        std::size_t first_col;
    };
    std::string text_;
    std::vector<Segment> segments_;
};

// What a directive word said, before defaults are applied.
struct Directive {
    std::optional<long> devices;
    std::optional<std::string> label;
    std::optional<double> timeout_s;
    std::optional<long> ports;
    std::optional<long> retries;
    std::optional<long> slots;
};

constexpr std::string_view known_keys = "known keys are devices, slots, label, timeout, ports and retries";

// More than a range of ports or a CI's patience could ever use; past it a
// value is a typo.
constexpr long max_ports = 65535;
constexpr long max_retries = 100;
// As many jobs as could share one device: more than any --device-slots.
constexpr long max_slots = 1024;

std::optional<long> parse_device_count(std::string_view s) {
    if (s.empty() || !std::all_of(s.begin(), s.end(),
                                  [](char c) { return c >= '0' && c <= '9'; }))
        return std::nullopt;
    long value = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc{} || ptr != s.data() + s.size() || value > max_devices)
        return std::nullopt;
    return value;
}

// Label -> the line of its first use. Shared by all directives of a file.
using LabelLines = std::unordered_map<std::string, std::size_t>;

class DirectiveParser {
public:
    DirectiveParser(const LogicalLine& line, ErrorList& errors, LabelLines& labels)
        : line_(line), errors_(errors), labels_(labels) {}

    // `word` is the directive including '@'; `offset` is where it starts.
    Directive parse(std::string_view word, std::size_t offset) {
        word_ = word;
        if (word.size() == 1) {
            error(offset, "empty directive '@'; expected a device count or "
                          "key=value items, such as '@2' or '@devices=2,label=name'");
            return std::move(result_);
        }
        std::size_t start = 1;
        while (start <= word.size()) {
            std::size_t end = word.find(',', start);
            if (end == std::string_view::npos) end = word.size();
            item(word.substr(start, end - start), offset + start);
            start = end + 1;
        }
        if (result_.slots && result_.devices)
            error(offset, "slots=" + std::to_string(*result_.slots) +
                              " takes slots of one device; it cannot go with a device count in " +
                              quote(word_));
        return std::move(result_);
    }

private:
    enum class Key { devices, label, timeout, ports, retries, slots };

    void item(std::string_view text, std::size_t offset) {
        if (text.empty()) {
            error(offset, "empty item in directive " + quote(word_) +
                              "; items are separated by single commas");
            return;
        }
        const std::size_t eq = text.find('=');
        if (eq == std::string_view::npos) {
            bare_item(text, offset);
            return;
        }
        const std::string_view key = text.substr(0, eq);
        const std::string_view value = text.substr(eq + 1);
        if (key.empty()) {
            error(offset, "missing key before '=' in directive item " + quote(text) +
                              "; " + std::string(known_keys));
            return;
        }
        const std::optional<Key> k = lookup(key);
        if (!k) {
            error(offset, "unknown directive key " + quote(key) + "; " +
                              std::string(known_keys));
            return;
        }
        keyed_item(*k, key, value, offset);
    }

    // A bare number is short for devices=N; a bare key name is a forgotten
    // value, which deserves a better message than "unknown item".
    void bare_item(std::string_view text, std::size_t offset) {
        const char c = text.front();
        if ((c >= '0' && c <= '9') || c == '-' || c == '+') {
            keyed_item(Key::devices, "devices", text, offset);
        } else if (lookup(text)) {
            error(offset, "directive key " + quote(text) + " needs a value: expected " +
                              quote(std::string(text) + "=..."));
        } else {
            error(offset, "unknown directive item " + quote(text) +
                              "; expected a device count or key=value (" +
                              std::string(known_keys) + ")");
        }
    }

    void keyed_item(Key k, std::string_view key, std::string_view value,
                    std::size_t offset) {
        auto& seen = seen_[static_cast<std::size_t>(k)];
        if (seen) {
            error(offset, "directive key " + quote(key) + " given twice in " + quote(word_));
            return;
        }
        seen = true;
        switch (k) {
        case Key::devices: return devices(value, offset);
        case Key::label: return label(value, offset);
        case Key::timeout: return timeout(value, offset);
        case Key::ports: return count(result_.ports, "port count", max_ports, value, offset);
        case Key::retries: return count(result_.retries, "retry count", max_retries, value, offset);
        case Key::slots: return count(result_.slots, "slot count", max_slots, value, offset, 1);
        }
    }

    void devices(std::string_view value, std::size_t offset) {
        result_.devices = parse_device_count(value);
        if (!result_.devices)
            error(offset, "invalid device count " + quote(value) +
                              "; expected an integer from 0 to " +
                              std::to_string(max_devices));
    }

    void label(std::string_view value, std::size_t offset) {
        // Whitespace and commas cannot get here: they end the word or the item.
        if (value.empty()) {
            error(offset, "empty label; expected a name without whitespace or commas");
        } else if (std::any_of(value.begin(), value.end(), is_control)) {
            error(offset, "label " + quote(value) +
                              " contains a control character; expected a name "
                              "without whitespace, commas or control characters");
        } else {
            unique_label(value, offset);
        }
    }

    void unique_label(std::string_view value, std::size_t offset) {
        const auto [it, inserted] =
            labels_.try_emplace(std::string(value), line_.first_line());
        if (inserted)
            result_.label = std::string(value);
        else
            error(offset, "duplicate label " + quote(value) + " (first used on line " +
                              std::to_string(it->second) + ")");
    }

    void timeout(std::string_view value, std::size_t offset) {
        auto seconds = parse_seconds(value);
        if (seconds)
            result_.timeout_s = *seconds;
        else
            error(offset, "invalid timeout " + quote(value) + ": " + seconds.error().message);
    }

    void count(std::optional<long>& into, const char* what, long max, std::string_view value,
               std::size_t offset, long min = 0) {
        long v = 0;
        const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        if (value.empty() || ec != std::errc{} || ptr != value.data() + value.size() || v < min || v > max ||
            value.front() == '+' || value.front() == '-')
            error(offset, std::string("invalid ") + what + " " + quote(value) + "; expected an integer from " +
                              std::to_string(min) + " to " + std::to_string(max) +
                              (min == 1 && v == 0 && ec == std::errc{} ? " (a job that needs no device is '@0')" : ""));
        else
            into = v;
    }

    static std::optional<Key> lookup(std::string_view key) {
        if (key == "devices") return Key::devices;
        if (key == "label") return Key::label;
        if (key == "timeout") return Key::timeout;
        if (key == "ports") return Key::ports;
        if (key == "retries") return Key::retries;
        if (key == "slots") return Key::slots;
        return std::nullopt;
    }

    void error(std::size_t offset, std::string message) {
        const auto [line, col] = line_.position(offset);
        errors_.add(line, col, std::move(message));
    }

    const LogicalLine& line_;
    ErrorList& errors_;
    LabelLines& labels_;
    std::string_view word_;
    Directive result_;
    std::array<bool, 6> seen_{};
};

// ---- the file -------------------------------------------------------------

class Parser {
public:
    explicit Parser(std::string_view text) : reader_(text) {}

    ParseResult run() {
        while (!errors_.full()) {
            std::optional<PhysicalLine> p = reader_.next();
            if (!p) break;
            // A comment line never continues, whatever it ends with.
            if (is_skippable(p->text)) continue;
            LogicalLine line = join(*p);
            if (!is_skippable(line.text())) job(line);
        }
        ParseResult r;
        if (errors_.empty()) {
            assign_default_labels(jobs_);
            r.jobs = std::move(jobs_);
        } else {
            r.errors = errors_.take();
        }
        return r;
    }

private:
    LogicalLine join(const PhysicalLine& first) {
        LogicalLine line;
        line.append(first);
        PhysicalLine last = first;
        while (continues(last.text)) {
            line.drop_last_byte();
            std::optional<PhysicalLine> next = reader_.next();
            if (!next) {
                errors_.add(last.line, last.first_col + last.text.size() - 1,
                            "backslash at end of file continues nothing");
                break;
            }
            line.append(*next);
            last = *next;
        }
        return line;
    }

    void job(const LogicalLine& line) {
        const std::string_view text = line.text();
        std::size_t i = skip_spaces(text, 0);
        Directive d;
        std::string_view word;
        if (text[i] == '@') {
            std::size_t end = i;
            while (end < text.size() && !is_space(text[end])) ++end;
            word = text.substr(i, end - i);
            d = DirectiveParser(line, errors_, labels_).parse(word, i);
            i = skip_spaces(text, end);
            if (i == text.size()) {
                error(line, end, "directive " + quote(word) +
                                     " is not followed by a command");
                return;
            }
        }
        const std::string_view command = trim_right(text.substr(i));
        if (command.size() >= max_command_bytes) {
            error(line, i, "command is " + std::to_string(command.size()) +
                               " bytes; the kernel limit for one argument is " +
                               std::to_string(max_command_bytes) +
                               " bytes (NUL included)");
        }
        JobSpec j;
        j.seq = jobs_.size() + 1;
        j.line = line.first_line();
        j.label_given = d.label.has_value();
        if (d.label) j.label = std::move(*d.label);
        j.devices = static_cast<int>(d.devices.value_or(1));
        j.timeout_s = d.timeout_s;
        j.ports = static_cast<int>(d.ports.value_or(0));
        if (d.retries) j.retries = static_cast<int>(*d.retries);
        if (d.slots) j.slots = static_cast<int>(*d.slots);
        j.command = std::string(command);
        jobs_.push_back(std::move(j));
    }

    void error(const LogicalLine& line, std::size_t offset, std::string message) {
        const auto [l, c] = line.position(offset);
        errors_.add(l, c, std::move(message));
    }

    LineReader reader_;
    ErrorList errors_;
    std::vector<JobSpec> jobs_;
    LabelLines labels_;
};

}  // namespace

std::optional<Diagnostic> InputCheck::feed(std::string_view bytes) {
    if (bytes_ + bytes.size() > max_file_bytes)
        return Diagnostic{line_, line_bytes_ + 1,
                          "the commands file is larger than " + std::to_string(max_file_bytes >> 20) +
                              " MiB, the most pto-par reads; split the suite into several files"};
    bytes_ += bytes.size();
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        const char c = bytes[i];
        if (line_ > max_file_lines)
            return Diagnostic{line_, 1,
                              "the commands file has more than " + std::to_string(max_file_lines) +
                                  " lines, the most pto-par reads; split the suite into several files"};
        if (c == '\n') {
            ++line_;
            line_bytes_ = 0;
            continue;
        }
        ++line_bytes_;
        // A NUL byte means this is not a text file at all: every other
        // diagnostic would be noise, so it is the only one reported.
        if (c == '\0') return Diagnostic{line_, line_bytes_, "NUL byte in commands file"};
        if (line_bytes_ > max_line_bytes)
            return Diagnostic{line_, line_bytes_,
                              "line is longer than " + std::to_string(max_line_bytes) +
                                  " bytes, and a command can have at most " +
                                  std::to_string(max_command_bytes - 1) +
                                  " (the kernel's limit for one argument is " +
                                  std::to_string(max_command_bytes) + " bytes, NUL included)"};
    }
    return std::nullopt;
}

ParseResult parse_commands(std::string_view text) {
    if (std::optional<Diagnostic> bad = InputCheck().feed(text)) {
        ParseResult r;
        r.errors.push_back(std::move(*bad));
        return r;
    }
    return Parser(text).run();
}

std::string format_diagnostic(std::string_view file_name, const Diagnostic& d) {
    std::string out(file_name);
    out += ':';
    out += std::to_string(d.line);
    out += ':';
    out += std::to_string(d.col);
    out += ": error: ";
    out += d.message;
    return out;
}

}  // namespace pto::cmdfile
