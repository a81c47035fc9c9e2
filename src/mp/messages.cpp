#include "mp/messages.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace pto::mp::detail {

std::string rank_list(std::span<const int> ranks)
{
    std::string text = ranks.size() == 1 ? "rank " : "ranks ";
    for (std::size_t i = 0; i < ranks.size();) {
        std::size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
        if (i > 0) text += ',';
        text += std::to_string(ranks[i]);
        if (j > i) text += '-' + std::to_string(ranks[j]);
        i = j + 1;
    }
    return text;
}

std::string type_name(const std::type_info& type)
{
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> name(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status),
                                                      &std::free);
    return status == 0 && name ? std::string(name.get()) : std::string(type.name());
}

const char* kind_name(Kind kind)
{
    switch (kind) {
    case Kind::barrier: return "barrier";
    case Kind::all_reduce: return "all_reduce";
    case Kind::broadcast: return "broadcast";
    case Kind::all_gather: return "all_gather";
    }
    return "collective";
}

const char* op_name(ReduceOp op)
{
    switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::product: return "product";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    }
    return "op";
}

std::string describe_elements(std::size_t count, const std::type_info& type)
{
    return std::to_string(count) + " x " + type_name(type);
}

std::string describe_arguments(const Part& part)
{
    switch (part.kind) {
    case Kind::barrier: break;
    case Kind::all_reduce: return describe_elements(part.count, *part.type) + ", " + op_name(part.op);
    case Kind::broadcast: return describe_elements(part.count, *part.type) + ", src " + std::to_string(part.root);
    case Kind::all_gather: return type_name(*part.type);
    }
    return {};
}

std::string describe_call(const Part& part)
{
    const std::string arguments = describe_arguments(part);
    return kind_name(part.kind) + (arguments.empty() ? std::string() : '(' + arguments + ')');
}

std::string describe_exception(const std::exception_ptr& error)
{
    try {
        std::rethrow_exception(error);
    } catch (const std::exception& e) {
        return e.what();
    } catch (...) {
        const std::type_info* type = abi::__cxa_current_exception_type();
        return type ? "an exception of type " + type_name(*type) : std::string("an unknown exception");
    }
}

}  // namespace pto::mp::detail
