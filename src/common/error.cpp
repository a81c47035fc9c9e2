#include <pto/error.hpp>

#include <cstring>

namespace pto {

Error sys_error(std::string what, int err)
{
    what += ": ";
    what += std::strerror(err);
    return Error{std::move(what), err};
}

}  // namespace pto
