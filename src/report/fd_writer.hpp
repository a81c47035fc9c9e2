#pragma once

#include <string_view>

namespace pto::report {

// Writes all of `bytes` to `fd`, riding out EINTR and short writes.
// False on any other error, with errno set (EPIPE when the reader left).
bool write_all(int fd, std::string_view bytes);

}  // namespace pto::report
