#include "screen.hpp"

namespace pto::test {
namespace {

bool continuation(char c)
{
    return (static_cast<unsigned char>(c) & 0xc0) == 0x80;
}

}  // namespace

std::size_t columns(std::string_view text)
{
    std::size_t n = 0;
    for (char c : text)
        n += continuation(c) ? 0 : 1;
    return n;
}

Screen render(std::string_view bytes, std::size_t cols)
{
    Screen s;
    std::vector<std::vector<std::string>> cells(1);  // per row, a glyph per column
    std::size_t row = 0, col = 0;
    const auto put = [&](std::string glyph) {
        if (col >= cols) {
            ++s.wraps;
            ++row;
            col = 0;
        }
        if (row >= cells.size())
            cells.resize(row + 1);
        auto& r = cells[row];
        if (r.size() <= col)
            r.resize(col + 1, " ");
        r[col++] = std::move(glyph);
    };
    for (std::size_t i = 0; i < bytes.size();) {
        const char c = bytes[i];
        if (c == '\r') {
            col = 0;
            ++i;
        } else if (c == '\n') {
            ++row;
            if (row >= cells.size())
                cells.resize(row + 1);
            ++i;
        } else if (c == '\x1b' && i + 1 < bytes.size() && bytes[i + 1] == '[') {
            std::size_t j = i + 2;
            while (j < bytes.size() && ((bytes[j] >= '0' && bytes[j] <= '9') || bytes[j] == ';'))
                ++j;
            const std::string_view params = bytes.substr(i + 2, j - i - 2);
            const char final = j < bytes.size() ? bytes[j] : '\0';
            if (final == 'K' && (params.empty() || params == "0")) {
                if (row < cells.size() && cells[row].size() > col)
                    cells[row].resize(col);
            } else if (final != 'm') {
                s.unknown.emplace_back(bytes.substr(i, j + 1 - i));
            }
            i = j + 1;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            s.unknown.emplace_back(1, c);
            ++i;
        } else {
            std::size_t j = i + 1;
            while (j < bytes.size() && continuation(bytes[j]))
                ++j;
            put(std::string(bytes.substr(i, j - i)));
            i = j;
        }
    }
    for (const auto& r : cells) {
        std::string line;
        for (const auto& g : r)
            line += g;
        line.erase(line.find_last_not_of(' ') + 1);
        s.rows.push_back(std::move(line));
    }
    while (!s.rows.empty() && s.rows.back().empty())
        s.rows.pop_back();
    return s;
}

std::vector<std::string> progress_draws(std::string_view bytes)
{
    std::vector<std::string> draws;
    for (std::size_t at = bytes.find('\r'); at != std::string_view::npos; at = bytes.find('\r', at + 1)) {
        const std::size_t end = bytes.find("\x1b[K", at + 1);
        if (end == std::string_view::npos)
            break;
        const std::string_view text = bytes.substr(at + 1, end - at - 1);
        // A CR that ends a line (CR LF) or starts an erase is no drawing.
        if (text.empty() || text.find('\n') != std::string_view::npos || text.find('\r') != std::string_view::npos)
            continue;
        draws.emplace_back(text);
    }
    return draws;
}

}  // namespace pto::test
