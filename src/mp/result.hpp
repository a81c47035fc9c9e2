// Errors as values inside pto::mp. The module has its own small error type,
// not the one of <pto/error.hpp>, so that libptomp depends on nothing else in
// the project; spawn() turns these into exceptions at the public edge.
#pragma once

#include <string>
#include <utility>

#include <tl/expected.hpp>

namespace pto::mp::detail {

struct Error {
    // For a system error, what was attempted, without strerror: the
    // std::system_error that carries it to the user adds that.
    std::string message;
    int sys_errno = 0;
};

template <class T>
using Expected = tl::expected<T, Error>;

inline tl::unexpected<Error> fail(std::string message, int sys_errno = 0)
{
    return tl::unexpected<Error>(Error{std::move(message), sys_errno});
}

}  // namespace pto::mp::detail
