// Any bytes as XML 1.0 text, for the JUnit report.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pto::report {

// Escapes bytes for XML 1.0 text (or, with `attribute`, a double-quoted
// attribute value), fed in pieces of any size: a UTF-8 sequence split
// between two pieces is still recognised. Valid UTF-8 is kept; what XML 1.0
// cannot carry even as &#N; (control characters, invalid UTF-8 bytes,
// U+FFFE/U+FFFF) becomes visible text like \x01; & < > are entities (so
// "]]>" cannot occur), as are " ' tab and newline in attributes and
// carriage returns everywhere (a parser would fold them away otherwise).
class XmlEscaper {
public:
    explicit XmlEscaper(bool attribute = false) : attribute_(attribute) {}

    void feed(std::string_view bytes, std::string& out);
    // Escapes a UTF-8 sequence left cut short at the end.
    void finish(std::string& out);
    // Whether the bytes fed so far end inside a UTF-8 sequence.
    bool mid_character() const { return npending_ != 0; }

private:
    void put_ascii(unsigned char c, std::string& out) const;

    bool attribute_;
    unsigned char pending_[4] = {};
    std::size_t npending_ = 0;
};

// All of `bytes` at once through an XmlEscaper.
std::string xml_escape(std::string_view bytes, bool attribute = false);

}  // namespace pto::report
