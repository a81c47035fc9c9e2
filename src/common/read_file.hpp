// A whole (small) file as a string, read with a bound, so that a wrong path
// (/dev/zero, a disk image) can never make pto-par read without end.
#pragma once

#include <cstddef>
#include <string>

#include <pto/error.hpp>

namespace pto {

// `what` names the file in errors ("history file 'r.json'"). The error's
// sys_errno is the failing call's errno (ENOENT: no such file), or E2BIG
// when the file holds more than `max_bytes`.
Expected<std::string> read_file(const std::string& path, std::size_t max_bytes, const std::string& what);

}  // namespace pto
