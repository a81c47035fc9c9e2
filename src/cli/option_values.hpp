// The parsers of single option values: each says which option and why when
// the text is not one it accepts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <pto/error.hpp>

#include "report/output_writer.hpp"

namespace pto::cli {

// SECS for `opt`; zero only where `allow_zero`.
Expected<double> parse_seconds_option(const char* opt, const char* text, bool allow_zero);

// --jobs N|auto; 0 for auto.
Expected<std::size_t> parse_jobs(const char* text);

Expected<report::OutputMode> parse_output(const char* text);

// `text` if it is one of `words`, else the error naming them all:
// "expected auto, always or never".
Expected<std::string> one_of(std::string_view text, const char* option, std::initializer_list<std::string_view> words);

// BYTES: a whole number, optionally followed by K, M or G (powers of 1024).
Expected<std::uint64_t> parse_bytes(std::string_view text, const char* option);

// local or slurm: true for slurm. `where` names the option or variable.
Expected<bool> parse_launcher(std::string_view text, const char* where);

}  // namespace pto::cli
