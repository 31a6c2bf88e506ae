// Json: round trips, escapes, and parse errors with positions.
#include <catch2/catch.hpp>

#include <cmath>

#include "common/Json.h"

using ringtrain::Json;

TEST_CASE("Json round-trips nested values in insertion order") {
  Json j = Json::object();
  j.set("b", 2);
  j.set("a", "text with \"quotes\"\n and \\ slash");
  Json arr = Json::array();
  arr.push(1.5);
  arr.push(nullptr);
  arr.push(true);
  arr.push(Json::object());
  j.set("list", std::move(arr));
  j.set("big", 9007199254740993LL);

  for (int indent : {0, 2}) {
    const Json back = Json::parse(j.dump(indent));
    CHECK(back.dump() == j.dump());
    CHECK(back.as_object()[0].first == "b");
    CHECK(back.at("a").as_string() == "text with \"quotes\"\n and \\ slash");
    CHECK(back.at("list").as_array()[0].as_double() == 1.5);
    CHECK(back.at("list").as_array()[1].is_null());
    CHECK(back.at("big").as_int() == 9007199254740993LL);
  }
}

TEST_CASE("Json writes non-finite numbers as null") {
  Json j = Json::object();
  j.set("nan", std::nan(""));
  CHECK(j.dump() == R"({"nan":null})");
}

TEST_CASE("Json set replaces an existing key") {
  Json j = Json::object();
  j.set("k", 1);
  j.set("k", 2);
  CHECK(j.as_object().size() == 1);
  CHECK(j.at("k").as_int() == 2);
}

TEST_CASE("Json parses unicode escapes to UTF-8") {
  CHECK(Json::parse(R"("\u00e9\ud83d\ude00")").as_string() == "\xc3\xa9\xf0\x9f\x98\x80");
}

TEST_CASE("Json rejects malformed input with the byte offset") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(Json::parse(R"({"a": 1,})"), Contains("invalid JSON at byte"));
  CHECK_THROWS_WITH(Json::parse("[1, 2"), Contains("unexpected end of input"));
  CHECK_THROWS_WITH(Json::parse("{} x"), Contains("trailing characters"));
  CHECK_THROWS_WITH(Json::parse(R"("\x")"), Contains("unknown escape"));
  CHECK_THROWS_WITH(Json::object().at("missing"), Contains("missing key \"missing\""));
}
