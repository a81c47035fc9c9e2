#include <pto/mp.hpp>

#include <utility>

namespace pto::mp {

SpawnError::SpawnError(const std::string& message, Errors errors)
    : std::runtime_error(message), errors_(std::make_shared<const Errors>(std::move(errors)))
{
}

DeadlockError::DeadlockError(const std::string& message) : SpawnError(message, {}) {}

DeadlockError::DeadlockError(const std::string& message, Errors unwinding)
    : SpawnError(message, std::move(unwinding))
{
}

}  // namespace pto::mp
