// Placeholder expansion: one scan from brace to brace. Values are appended,
// never rescanned, so a label such as "{seq}" stays literal in the output.
#include "cmdfile/commands_file.hpp"

#include <array>
#include <utility>

namespace pto::cmdfile {
namespace {

using Field = std::string Placeholders::*;

constexpr std::array<std::pair<std::string_view, Field>, 6> names{{
    {"{devices}", &Placeholders::devices},
    {"{device_list}", &Placeholders::device_list},
    {"{ndevices}", &Placeholders::ndevices},
    {"{label}", &Placeholders::label},
    {"{seq}", &Placeholders::seq},
    {"{port}", &Placeholders::port},
}};

// The value for the placeholder that starts `rest`, or null when the brace
// there is ordinary text ("{}", "${HOME}", an unclosed "{devices").
const std::pair<std::string_view, Field>* match(std::string_view rest) {
    for (const auto& entry : names)
        if (rest.starts_with(entry.first)) return &entry;
    return nullptr;
}

}  // namespace

std::string expand_placeholders(std::string_view command, const Placeholders& values) {
    std::string out;
    // Most commands use each placeholder at most once; this avoids regrowth
    // then, and costs nothing worth mentioning otherwise.
    std::size_t guess = command.size();
    for (const auto& entry : names) guess += (values.*entry.second).size();
    out.reserve(guess);

    std::size_t pos = 0;
    while (pos < command.size()) {
        const std::size_t brace = command.find('{', pos);
        if (brace == std::string_view::npos) break;
        out.append(command, pos, brace - pos);
        if (const auto* entry = match(command.substr(brace))) {
            out += values.*entry->second;
            pos = brace + entry->first.size();
        } else {
            out += '{';
            pos = brace + 1;
        }
    }
    out.append(command, pos);
    return out;
}

}  // namespace pto::cmdfile
