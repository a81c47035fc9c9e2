#include <doctest/doctest.h>

#include <pto/devices.hpp>

using pto::format_device_range;
using pto::parse_device_range;

namespace {

std::vector<int> ok(std::string_view spec)
{
    auto r = parse_device_range(spec);
    REQUIRE_MESSAGE(r.has_value(), spec);
    return *r;
}

std::string err(std::string_view spec)
{
    auto r = parse_device_range(spec);
    REQUIRE_MESSAGE(!r.has_value(), spec);
    return r.error().message;
}

}  // namespace

TEST_SUITE("devices") {

TEST_CASE("single ids, ranges and mixtures")
{
    CHECK(ok("0") == std::vector<int>{0});
    CHECK(ok("0-3") == std::vector<int>{0, 1, 2, 3});
    CHECK(ok("0,2,5") == std::vector<int>{0, 2, 5});
    CHECK(ok("0,2-4,7") == std::vector<int>{0, 2, 3, 4, 7});
    CHECK(ok("5-5") == std::vector<int>{5});
    CHECK(ok("65535") == std::vector<int>{65535});
}

TEST_CASE("whitespace is trimmed, empty parts ignored, duplicates merged, result sorted")
{
    CHECK(ok(" 1 , 2 - 3 ,\t4") == std::vector<int>{1, 2, 3, 4});
    CHECK(ok("1,,2,") == std::vector<int>{1, 2});
    CHECK(ok("3,1-4,2") == std::vector<int>{1, 2, 3, 4});
    CHECK(ok("").empty());
    CHECK(ok(" , ").empty());
}

TEST_CASE("each bad part is named in the error")
{
    CHECK(err("3-1").find("'3-1'") != std::string::npos);
    CHECK(err("3-1").find("greater") != std::string::npos);
    CHECK(err("-2").find("'-2'") != std::string::npos);
    CHECK(err("-2").find("negative") != std::string::npos);
    CHECK(err("a").find("'a'") != std::string::npos);
    CHECK(err("0,a,2").find("'a'") != std::string::npos);
    CHECK(err("1-").find("'1-'") != std::string::npos);
    CHECK(err("1-").find("last id") != std::string::npos);
    CHECK(err("65536").find("'65536'") != std::string::npos);
    CHECK(err("65536").find("65535") != std::string::npos);
    CHECK(err("0-70000").find("'0-70000'") != std::string::npos);
    CHECK(err("99999999999999").find("'99999999999999'") != std::string::npos);
    CHECK(err("1-2-3").find("'1-2-3'") != std::string::npos);
    CHECK(err("+1").find("'+1'") != std::string::npos);
    CHECK(err("1.5").find("'1.5'") != std::string::npos);
}

TEST_CASE("format is the inverse")
{
    CHECK(format_device_range(std::vector<int>{}) == "");
    CHECK(format_device_range(std::vector<int>{4}) == "4");
    CHECK(format_device_range(std::vector<int>{0, 1, 2, 3}) == "0-3");
    CHECK(format_device_range(std::vector<int>{3, 2, 1, 0}) == "0-3");
    CHECK(format_device_range(std::vector<int>{0, 2, 5}) == "0,2,5");
    CHECK(format_device_range(std::vector<int>{0, 1, 2, 5}) == "0,1,2,5");
    CHECK(format_device_range(std::vector<int>{7, 7}) == "7");
    for (const char* spec : {"0", "0-3", "0,2,5", "1,3-4"}) {
        const auto ids = ok(spec);
        CHECK(ok(format_device_range(ids)) == ids);
    }
}

TEST_CASE("device list is always comma-separated")
{
    CHECK(pto::format_device_list(std::vector<int>{2, 0, 1}) == "0,1,2");
    CHECK(pto::format_device_list(std::vector<int>{}) == "");
}

}
