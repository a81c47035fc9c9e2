// Wording shared by the error messages of pto::mp.
#pragma once

#include <pto/mp.hpp>

#include <exception>
#include <span>
#include <string>
#include <typeinfo>

namespace pto::mp::detail {

// "rank 3" or "ranks 0-2,5,7-9"; `ranks` sorted ascending, not empty.
std::string rank_list(std::span<const int> ranks);

// The demangled name of a type, as a user wrote it.
std::string type_name(const std::type_info& type);

// A collective call as its ranks made it: "all_reduce(4 x int, sum)", "barrier".
std::string describe_call(const Part& part);
// The part in parentheses: "4 x int, sum"; empty for a barrier.
std::string describe_arguments(const Part& part);
const char* kind_name(Kind kind);
const char* op_name(ReduceOp op);

// "4 x int"
std::string describe_elements(std::size_t count, const std::type_info& type);

// what() of a std::exception, else its type: "an exception of type int".
std::string describe_exception(const std::exception_ptr& error);

}  // namespace pto::mp::detail
