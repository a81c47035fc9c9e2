// Errors as values: every fallible function in libptopar returns
// pto::Expected<T>; exceptions and exit codes live only at the edges
// (the CLI's main and the throwing convenience wrappers of the public API).
#pragma once

#include <string>
#include <utility>

#include <tl/expected.hpp>

namespace pto {

struct Error {
    std::string message;  // human-readable, with the context that failed
    int sys_errno = 0;    // the errno behind it, 0 when not a system error
};

template <class T>
using Expected = tl::expected<T, Error>;

inline tl::unexpected<Error> fail(std::string message, int sys_errno = 0)
{
    return tl::unexpected<Error>(Error{std::move(message), sys_errno});
}

// "what: strerror(errno)" for a failed system call.
Error sys_error(std::string what, int err);

}  // namespace pto
