#include "report/xml_escape.hpp"

#include "common/utf8.hpp"

namespace pto::report {
namespace {

constexpr char hex_digits[] = "0123456789abcdef";

void put_hex(unsigned char c, std::string& out)
{
    out += "\\x";
    out += hex_digits[c >> 4];
    out += hex_digits[c & 15];
}

// utf8::decode over raw bytes, as the escaper below holds them.
int utf8_sequence(const unsigned char* p, std::size_t avail, char32_t& cp)
{
    const utf8::Sequence seq = utf8::decode(std::string_view(reinterpret_cast<const char*>(p), avail));
    cp = seq.code_point;
    return seq.length;
}

// XML 1.0's Char production, for what UTF-8 decoding lets through.
bool xml_char(char32_t cp)
{
    return cp != 0xfffe && cp != 0xffff;
}

}  // namespace

void XmlEscaper::put_ascii(unsigned char c, std::string& out) const
{
    switch (c) {
    case '&': out += "&amp;"; return;
    case '<': out += "&lt;"; return;
    case '>': out += "&gt;"; return;
    case '"': out += attribute_ ? "&quot;" : "\""; return;
    case '\'': out += attribute_ ? "&apos;" : "'"; return;
    case '\t': out += attribute_ ? "&#9;" : "\t"; return;
    case '\n': out += attribute_ ? "&#10;" : "\n"; return;
    case '\r': out += "&#13;"; return;
    default: break;
    }
    if (c < 0x20 || c == 0x7f)
        put_hex(c, out);
    else
        out += static_cast<char>(c);
}

void XmlEscaper::feed(std::string_view bytes, std::string& out)
{
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const std::size_t size = bytes.size();
    std::size_t i = 0;
    char32_t cp = 0;

    if (npending_ != 0) {
        // Complete the sequence the previous piece ended in the middle of.
        unsigned char seq[4];
        std::copy(pending_, pending_ + npending_, seq);
        const std::size_t take = std::min(sizeof seq - npending_, size);
        std::copy(p, p + take, seq + npending_);
        const int n = utf8_sequence(seq, npending_ + take, cp);
        if (n < 0) {  // still short: this whole piece was part of it
            std::copy(seq, seq + npending_ + take, pending_);
            npending_ += take;
            return;
        }
        if (n > 0 && xml_char(cp)) {
            out.append(reinterpret_cast<const char*>(seq), static_cast<std::size_t>(n));
            i = static_cast<std::size_t>(n) - npending_;
        } else {
            // The lead byte was bad; the ones after it are continuation
            // bytes, which cannot start a sequence either.
            for (std::size_t k = 0; k < npending_; ++k)
                put_hex(pending_[k], out);
            if (n > 0) {  // U+FFFE or U+FFFF: every byte of it as \xNN
                for (std::size_t k = npending_; k < static_cast<std::size_t>(n); ++k)
                    put_hex(seq[k], out);
                i = static_cast<std::size_t>(n) - npending_;
            }
        }
        npending_ = 0;
    }

    while (i < size) {
        const unsigned char c = p[i];
        if (c < 0x80) {
            put_ascii(c, out);
            ++i;
            continue;
        }
        const int n = utf8_sequence(p + i, size - i, cp);
        if (n < 0) {
            npending_ = size - i;
            std::copy(p + i, p + size, pending_);
            return;
        }
        if (n == 0) {
            put_hex(c, out);
            ++i;
            continue;
        }
        if (xml_char(cp))
            out.append(bytes.substr(i, static_cast<std::size_t>(n)));
        else
            for (int k = 0; k < n; ++k)
                put_hex(p[i + static_cast<std::size_t>(k)], out);
        i += static_cast<std::size_t>(n);
    }
}

void XmlEscaper::finish(std::string& out)
{
    for (std::size_t k = 0; k < npending_; ++k)
        put_hex(pending_[k], out);
    npending_ = 0;
}

std::string xml_escape(std::string_view bytes, bool attribute)
{
    std::string out;
    out.reserve(bytes.size());
    XmlEscaper esc(attribute);
    esc.feed(bytes, out);
    esc.finish(out);
    return out;
}

}  // namespace pto::report
