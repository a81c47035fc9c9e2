// Just enough JSON to read back pto-par's own --json reports (JSON Lines):
// one value per call, strict RFC 8259 syntax, bounded nesting. Pure.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <pto/error.hpp>

namespace pto::plan {

struct JsonValue;
using JsonArray = std::vector<JsonValue>;
using JsonObject = std::map<std::string, JsonValue, std::less<>>;

struct JsonValue {
    std::variant<std::nullptr_t, bool, double, std::string, std::shared_ptr<JsonArray>, std::shared_ptr<JsonObject>>
        v;

    const std::string* string() const { return std::get_if<std::string>(&v); }
    const double* number() const { return std::get_if<double>(&v); }
    const JsonObject* object() const
    {
        const auto* p = std::get_if<std::shared_ptr<JsonObject>>(&v);
        return p != nullptr ? p->get() : nullptr;
    }
    const JsonArray* array() const
    {
        const auto* p = std::get_if<std::shared_ptr<JsonArray>>(&v);
        return p != nullptr ? p->get() : nullptr;
    }
};

// The one value `text` holds (blanks around it allowed); the error says
// what is wrong and at which byte.
Expected<JsonValue> parse_json(std::string_view text);

}  // namespace pto::plan
