#include "plan/json_value.hpp"

#include <cmath>
#include <cstdlib>

namespace pto::plan {
namespace {

// Deeper than any report pto-par writes (3), shallow enough that a hostile
// file cannot exhaust the stack.
constexpr int max_depth = 32;

class Parser {
public:
    explicit Parser(std::string_view text) : s_(text) {}

    Expected<JsonValue> document()
    {
        auto v = value(0);
        if (!v)
            return v;
        blanks();
        if (i_ != s_.size())
            return error("text after the value");
        return v;
    }

private:
    tl::unexpected<Error> error(const std::string& what) const
    {
        return fail(what + " at byte " + std::to_string(i_ + 1));
    }

    void blanks()
    {
        while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
            ++i_;
    }

    bool literal(std::string_view word)
    {
        if (s_.substr(i_, word.size()) != word)
            return false;
        i_ += word.size();
        return true;
    }

    Expected<JsonValue> value(int depth)
    {
        if (depth > max_depth)
            return error("nesting deeper than " + std::to_string(max_depth));
        blanks();
        if (i_ >= s_.size())
            return error("a value was expected");
        const char c = s_[i_];
        if (c == '{')
            return object(depth);
        if (c == '[')
            return array(depth);
        if (c == '"') {
            auto str = string();
            if (!str)
                return tl::unexpected(str.error());
            return JsonValue{std::move(*str)};
        }
        if (literal("null"))
            return JsonValue{nullptr};
        if (literal("true"))
            return JsonValue{true};
        if (literal("false"))
            return JsonValue{false};
        return number();
    }

    Expected<JsonValue> number()
    {
        const std::size_t start = i_;
        if (i_ < s_.size() && s_[i_] == '-')
            ++i_;
        const auto digits = [this] {
            const std::size_t from = i_;
            while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9')
                ++i_;
            return i_ > from;
        };
        if (!digits())
            return error("a value was expected");
        if (i_ < s_.size() && s_[i_] == '.') {
            ++i_;
            if (!digits())
                return error("a digit was expected after '.'");
        }
        if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
            ++i_;
            if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-'))
                ++i_;
            if (!digits())
                return error("a digit was expected in the exponent");
        }
        const std::string text(s_.substr(start, i_ - start));
        const double v = std::strtod(text.c_str(), nullptr);
        if (!std::isfinite(v))
            return error("a number out of range");
        // Built in place: GCC 12 with the sanitizers warns of an
        // uninitialized string inside the variant for JsonValue{v}.
        JsonValue out;
        out.v.emplace<double>(v);
        return out;
    }

    static void put_utf8(std::string& out, unsigned cp)
    {
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }

    Expected<unsigned> hex4()
    {
        if (i_ + 4 > s_.size())
            return error("four hex digits were expected after \\u");
        unsigned v = 0;
        for (int k = 0; k < 4; ++k) {
            const char h = s_[i_++];
            v <<= 4;
            if (h >= '0' && h <= '9')
                v |= static_cast<unsigned>(h - '0');
            else if (h >= 'a' && h <= 'f')
                v |= static_cast<unsigned>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F')
                v |= static_cast<unsigned>(h - 'A' + 10);
            else
                return error("four hex digits were expected after \\u");
        }
        return v;
    }

    Expected<std::string> string()
    {
        ++i_;  // the opening quote
        std::string out;
        while (i_ < s_.size()) {
            const char c = s_[i_++];
            if (c == '"')
                return out;
            if (static_cast<unsigned char>(c) < 0x20)
                return error("a control character in a string");
            if (c != '\\') {
                out += c;
                continue;
            }
            if (i_ >= s_.size())
                break;
            const char e = s_[i_++];
            switch (e) {
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case '/': out += '/'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u': {
                auto cp = hex4();
                if (!cp)
                    return tl::unexpected(cp.error());
                unsigned code = *cp;
                if (code >= 0xD800 && code < 0xDC00 && s_.substr(i_, 2) == "\\u") {
                    i_ += 2;
                    auto low = hex4();
                    if (!low)
                        return tl::unexpected(low.error());
                    if (*low >= 0xDC00 && *low < 0xE000)
                        code = 0x10000 + ((code - 0xD800) << 10) + (*low - 0xDC00);
                }
                // A lone U+DC80..U+DCFF is a byte that was not UTF-8 (what
                // json_string writes for it): the byte itself comes back.
                if (code >= 0xDC80 && code <= 0xDCFF)
                    out += static_cast<char>(code - 0xDC00);
                else
                    put_utf8(out, code);
                break;
            }
            default:
                return error(std::string("an unknown escape \\") + e);
            }
        }
        return error("a string without its closing quote");
    }

    Expected<JsonValue> array(int depth)
    {
        ++i_;
        auto arr = std::make_shared<JsonArray>();
        blanks();
        if (i_ < s_.size() && s_[i_] == ']') {
            ++i_;
            return JsonValue{arr};
        }
        for (;;) {
            auto v = value(depth + 1);
            if (!v)
                return v;
            arr->push_back(std::move(*v));
            blanks();
            if (i_ < s_.size() && s_[i_] == ',') {
                ++i_;
                continue;
            }
            if (i_ < s_.size() && s_[i_] == ']') {
                ++i_;
                return JsonValue{arr};
            }
            return error("',' or ']' was expected");
        }
    }

    Expected<JsonValue> object(int depth)
    {
        ++i_;
        auto obj = std::make_shared<JsonObject>();
        blanks();
        if (i_ < s_.size() && s_[i_] == '}') {
            ++i_;
            return JsonValue{obj};
        }
        for (;;) {
            blanks();
            if (i_ >= s_.size() || s_[i_] != '"')
                return error("a key in quotes was expected");
            auto key = string();
            if (!key)
                return tl::unexpected(key.error());
            blanks();
            if (i_ >= s_.size() || s_[i_] != ':')
                return error("':' was expected");
            ++i_;
            auto v = value(depth + 1);
            if (!v)
                return v;
            (*obj)[std::move(*key)] = std::move(*v);
            blanks();
            if (i_ < s_.size() && s_[i_] == ',') {
                ++i_;
                continue;
            }
            if (i_ < s_.size() && s_[i_] == '}') {
                ++i_;
                return JsonValue{obj};
            }
            return error("',' or '}' was expected");
        }
    }

    std::string_view s_;
    std::size_t i_ = 0;
};

}  // namespace

Expected<JsonValue> parse_json(std::string_view text)
{
    return Parser(text).document();
}

}  // namespace pto::plan
