#include "cmdfile/commands_file.hpp"

#include <doctest/doctest.h>

#include <string>
#include <string_view>

using namespace std::string_view_literals;
using pto::cmdfile::expand_placeholders;
using pto::cmdfile::Placeholders;

namespace {

// Distinct values, so that a placeholder swapped for another shows.
Placeholders sample() {
    return {.devices = "0-3",
            .device_list = "0,1,2,3",
            .ndevices = "4",
            .label = "allgather",
            .seq = "17",
            .port = "29512"};
}

std::string expand(std::string_view command) {
    return expand_placeholders(command, sample());
}

}  // namespace

TEST_SUITE("placeholders") {

TEST_CASE("each of the five placeholders is replaced by its own value") {
    CHECK(expand("{devices}") == "0-3");
    CHECK(expand("{device_list}") == "0,1,2,3");
    CHECK(expand("{ndevices}") == "4");
    CHECK(expand("{label}") == "allgather");
    CHECK(expand("{seq}") == "17");
}

TEST_CASE("placeholders inside a command, repeated and adjacent") {
    CHECK(expand("pytest t.py --device {devices} -n {ndevices}") ==
          "pytest t.py --device 0-3 -n 4");
    CHECK(expand("{seq}{seq}-{label}.log {seq}") == "1717-allgather.log 17");
    CHECK(expand("x={device_list}/{devices}") == "x=0,1,2,3/0-3");
}

TEST_CASE("text without placeholders is unchanged") {
    CHECK(expand("") == "");
    CHECK(expand("echo hello") == "echo hello");
    CHECK(expand("a\0b\xff"sv) == "a\0b\xff"sv);
}

TEST_CASE("other brace text is left alone") {
    for (std::string_view s :
         {"{}"sv, "{foo}"sv, "${HOME}"sv, "{devices"sv, "{ devices}"sv, "{DEVICES}"sv,
          "{device}"sv, "{device_listx}"sv, "{seq }"sv, "}"sv, "{"sv, "a{"sv,
          "awk '{print $1}'"sv, "{{}}"sv, "{labels}"sv}) {
        CHECK(expand(s) == s);
    }
}

TEST_CASE("a placeholder inside other braces is still replaced") {
    CHECK(expand("{{devices}}") == "{0-3}");
    CHECK(expand("${seq}") == "$17");
    CHECK(expand("{x{label}") == "{xallgather");
    CHECK(expand("{devices{seq}") == "{devices17");
}

TEST_CASE("values are not expanded again") {
    Placeholders v = sample();
    v.label = "{seq}";
    v.devices = "{label}";
    CHECK(expand_placeholders("{label} {devices} {seq}", v) == "{seq} {label} 17");
}

TEST_CASE("empty values remove the placeholder") {
    const Placeholders none{};
    CHECK(expand_placeholders("--device '{devices}' n={ndevices}", none) ==
          "--device '' n=");
}

TEST_CASE("long commands with many placeholders") {
    std::string command;
    std::string expected;
    for (int i = 0; i < 20000; ++i) {
        command += "{seq}:{devices}{x} ";
        expected += "17:0-3{x} ";
    }
    CHECK(expand(command) == expected);
}

}  // TEST_SUITE
