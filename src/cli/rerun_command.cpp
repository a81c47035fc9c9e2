#include "cli/rerun_command.hpp"

#include <string_view>

#include "common/text.hpp"

namespace pto::cli {

std::string rerun_command(int argc, char** argv, const std::string& json)
{
    const std::string_view option = "--rerun-failed";
    std::string command = text::shell_word(argv[0]) + " --rerun-failed " + text::shell_word(json);
    for (int i = 1; i < argc; ++i) {
        const std::string_view word = argv[i];
        if (word == "--") {
            for (; i < argc; ++i)
                command += " " + text::shell_word(argv[i]);
            break;
        }
        const std::string_view name = word.substr(0, word.find('='));
        if (name.size() >= 5 && option.starts_with(name)) {
            if (name.size() == word.size())
                ++i;  // its value
            continue;
        }
        command += " " + text::shell_word(word);
    }
    return command;
}

}  // namespace pto::cli
