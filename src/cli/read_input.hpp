#pragma once

#include <string>

#include <pto/error.hpp>

namespace pto::cli {

// The whole commands file; "-" is standard input.
Expected<std::string> read_input(const std::string& file);

}  // namespace pto::cli
