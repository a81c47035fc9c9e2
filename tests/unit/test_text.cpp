#include <doctest/doctest.h>

#include <string>

#include "common/seconds.hpp"
#include "common/text.hpp"
#include "common/utf8.hpp"

using namespace std::string_literals;

TEST_SUITE("text") {

TEST_CASE("utf8::decode: lengths, code points, and what is not UTF-8")
{
    using pto::utf8::decode;
    CHECK(decode("a").length == 1);
    CHECK(decode("\xC3\xA9").length == 2);
    CHECK(decode("\xC3\xA9").code_point == U'\u00e9');
    CHECK(decode("\xE2\x82\xAC!").length == 3);
    CHECK(decode("\xE2\x82\xAC").code_point == U'\u20ac');
    CHECK(decode("\xF0\x9F\x98\x80").code_point == U'\U0001F600');
    CHECK(decode("\xE2\x82").length == -1);          // cut short
    CHECK(decode("\x80").length == 0);               // stray continuation
    CHECK(decode("\xC0\xAF").length == 0);           // overlong '/'
    CHECK(decode("\xE0\x80\xAF").length == 0);       // overlong
    CHECK(decode("\xED\xA0\x80").length == 0);       // surrogate
    CHECK(decode("\xF4\x90\x80\x80").length == 0);   // past U+10FFFF
    CHECK(decode("\xF5\x80\x80\x80").length == 0);
    CHECK(decode("\xC3(").length == 0);
}

TEST_CASE("printable keeps valid UTF-8 and escapes controls, bidi overrides and bad bytes")
{
    using pto::text::printable;
    CHECK(printable("t\xC3\xABst-\xE6\xB5\x8B\xE8\xAF\x95") == "t\xC3\xABst-\xE6\xB5\x8B\xE8\xAF\x95");
    CHECK(printable("\xF0\x9F\x98\x80") == "\xF0\x9F\x98\x80");
    CHECK(printable("a\x1b[31mb") == "a\\x1b[31mb");
    CHECK(printable("a\x7f") == "a\\x7f");
    CHECK(printable("\xC2\x9B" "31m") == "\\xc2\\x9b31m");            // C1 CSI
    CHECK(printable("a\xE2\x80\xAE" "cba") == "a\\xe2\\x80\\xaecba");  // RLO
    CHECK(printable("\xE2\x81\xA6x") == "\\xe2\\x81\\xa6x");            // LRI
    CHECK(printable("\xFF\xC3") == "\\xff\\xc3");
    CHECK(printable("a\xE2\x80\xA8" "b\xE2\x80\xA9") == "a\\xe2\\x80\\xa8b\\xe2\\x80\\xa9");  // line, paragraph separators
    CHECK(printable("\xC3\xA9\xA9") == "\xC3\xA9\\xa9");
    CHECK(printable("nul\0!"s) == "nul\\x00!");
}

TEST_CASE("is_env_name: what -e and $PTO_PAR_DEVICE_VARIABLE may name")
{
    using pto::text::is_env_name;
    CHECK(is_env_name("CUDA_VISIBLE_DEVICES"));
    CHECK(is_env_name("_x1"));
    CHECK_FALSE(is_env_name(""));
    CHECK_FALSE(is_env_name("1BAD"));
    CHECK_FALSE(is_env_name("A-B"));
    CHECK_FALSE(is_env_name("A=B"));
}

TEST_CASE("parse_seconds: one grammar and one range for the command line and the file")
{
    using pto::parse_seconds;
    using pto::SecondsMin;
    CHECK(*parse_seconds("600") == 600.0);
    CHECK(*parse_seconds("1.5") == 1.5);
    CHECK(*parse_seconds(".5") == 0.5);
    CHECK(*parse_seconds("1e9") == 1e9);
    CHECK(*parse_seconds("0", SecondsMin::zero) == 0.0);
    for (const char* bad : {"0", "0.0", "-1", "+1", "inf", "nan", "1e400", "", ".", " 5", "5 ", "0x10", "5s", "1..2"}) {
        const auto r = parse_seconds(bad);
        CHECK_MESSAGE(!r, bad);
        if (!r)
            CHECK(r.error().message == "expected a number of seconds > 0, such as 600, 1.5 or 2e3");
    }
    CHECK(parse_seconds("-0", SecondsMin::zero).error().message ==
          "expected a number of seconds >= 0, such as 600, 1.5 or 2e3");
}

TEST_CASE("columns and cut_to_columns: a column per code point, two for wide ones, never half a glyph")
{
    using pto::text::columns;
    using pto::text::cut_to_columns;
    CHECK(columns("") == 0);
    CHECK(columns("abc") == 3);
    CHECK(columns("caf\xC3\xA9") == 4);              // é: two bytes, one column
    CHECK(columns("\xE6\xB5\x8B\xE8\xAF\x95") == 4);  // 测试: two wide
    CHECK(columns("\xF0\x9F\x98\x80") == 2);         // an emoji
    CHECK(columns("\xE2\x80\xA6") == 1);              // …
    CHECK(cut_to_columns("abcdef", 3) == "abc");
    CHECK(cut_to_columns("abc", 10) == "abc");
    CHECK(cut_to_columns("caf\xC3\xA9s", 4) == "caf\xC3\xA9");
    CHECK(cut_to_columns("a\xE6\xB5\x8B\xE8\xAF\x95", 4) == "a\xE6\xB5\x8B");  // not half of 试
    CHECK(cut_to_columns("abc", 0).empty());
}

TEST_CASE("a word for the shell is quoted only when it must be, and reads back as it was")
{
    using pto::text::shell_word;
    CHECK(shell_word("tests.cmds") == "tests.cmds");
    CHECK(shell_word("--job-timeout=2") == "--job-timeout=2");
    CHECK(shell_word("a b") == "'a b'");
    CHECK(shell_word("it's") == "'it'\\''s'");
    CHECK(shell_word("") == "''");
    CHECK(shell_word("$HOME") == "'$HOME'");
}

}
