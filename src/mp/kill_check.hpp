// Whether the kill of a dying spawn, or an error, may be thrown at a suspension point: a
// throw out of a noexcept function (every destructor unless declared
// otherwise) ends the program, and only the unwind tables know where one is.
#pragma once

#include <typeinfo>

namespace pto::mp::detail {

// Walks the calling rank's frames outwards, as the unwinder's search phase
// would for an exception of type `thrown` (at `object`), and says whether a
// handler for it (catch (...), of its type or a base) comes before any
// noexcept boundary. false when
// a frame cannot be read: returning at once is always safe. Not noexcept,
// and must stay so: a noexcept frame of its own would be the first boundary
// the walk finds.
bool throw_would_be_caught(const std::type_info& thrown, void* object);

}  // namespace pto::mp::detail
