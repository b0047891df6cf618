// Copyright (c) cqlstream authors.
#include "store/json.h"

#include <gtest/gtest.h>

namespace cqlstream::store {
namespace {

TEST(JsonTest, ParsesObjectsArraysAndScalars) {
  auto j = ParseJson(R"( {"path": "a/b.jpg", "label": 3, "labels": ["x", 7], "ok": true, "n": null, "f": -1.5e3} )");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  ASSERT_TRUE(j->is_object());
  EXPECT_EQ(j->Find("path")->text, "a/b.jpg");
  EXPECT_EQ(j->Find("label")->AsInt(), 3);
  ASSERT_TRUE(j->Find("labels")->is_array());
  EXPECT_EQ(j->Find("labels")->items.size(), 2u);
  EXPECT_EQ(j->Find("labels")->items[1].text, "7");
  EXPECT_TRUE(j->Find("ok")->boolean);
  EXPECT_EQ(j->Find("n")->type, Json::Type::kNull);
  EXPECT_EQ(j->Find("f")->text, "-1.5e3");
  EXPECT_FALSE(j->Find("f")->AsInt().has_value());
  EXPECT_EQ(j->Find("missing"), nullptr);
}

TEST(JsonTest, StringEscapesIncludingSurrogatePairs) {
  auto j = ParseJson(R"("a\"b\\c\/d\n\u00e9\ud83d\ude00")");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->text, "a\"b\\c/d\n\xc3\xa9\xf0\x9f\x98\x80");
}

TEST(JsonTest, DumpIsCompactAndRoundTrips) {
  auto j = ParseJson(R"({ "a" : [1, "x\ty", {"b": false}], "c": null })");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->Dump(), R"({"a":[1,"x\ty",{"b":false}],"c":null})");
  auto again = ParseJson(j->Dump());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->Dump(), j->Dump());
  EXPECT_EQ(j->Find("a")->ToText(), R"([1,"x\ty",{"b":false}])");
}

TEST(JsonTest, ErrorsNameTheOffset) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "\"unterminated", "01", "1.", "tru", "{\"a\":1} x",
                          "\"\\ud800\"", "\"a\x01\""}) {
    auto j = ParseJson(bad);
    EXPECT_FALSE(j.ok()) << bad;
    if (!j.ok()) {
      EXPECT_EQ(j.status().code(), Status::Code::kInvalidArgument);
      EXPECT_NE(j.status().message().find("offset"), std::string::npos) << j.status().message();
    }
  }
}

TEST(JsonTest, DepthIsLimited) {
  std::string deep(kMaxJsonDepth + 5, '[');
  deep += std::string(kMaxJsonDepth + 5, ']');
  EXPECT_FALSE(ParseJson(deep).ok());
  std::string ok(10, '[');
  ok += std::string(10, ']');
  EXPECT_TRUE(ParseJson(ok).ok());
}

TEST(JsonTest, HostileInputIsAClearErrorNeverAnException) {
  // A \u escape with non-hex digits (the selection-file abort of issue 9 item 3),
  // invalid UTF-8, a lone continuation byte, an overlong encoding, a number
  // outside the double range, a NUL inside a string.
  for (std::string bad : {std::string(R"("\uZZZZ")"), std::string(R"("\u12")"), std::string("\"\xff\""),
                          std::string("\"\x80\""), std::string("\"\xc0\xaf\""), std::string("1e400"),
                          std::string("\"a\0b\"", 5), std::string("[1e999999999999]")}) {
    StatusOr<Json> j = Status::Internal("not parsed yet");
    EXPECT_NO_THROW(j = ParseJson(bad)) << bad;
    EXPECT_FALSE(j.ok()) << bad;
    if (!j.ok()) {
      EXPECT_EQ(j.status().code(), Status::Code::kInvalidArgument) << bad;
      EXPECT_NE(j.status().message().find("invalid JSON"), std::string::npos) << j.status().message();
    }
  }
}

TEST(JsonTest, HugeIntegersKeepTheirText) {
  auto j = ParseJson("[123456789012345678901234567890, -9223372036854775808, 18446744073709551615]");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->items[0].text, "123456789012345678901234567890");
  EXPECT_FALSE(j->items[0].AsInt().has_value());
  EXPECT_EQ(j->items[1].AsInt(), INT64_MIN);
  EXPECT_EQ(j->items[2].text, "18446744073709551615");
}

TEST(JsonTest, VeryDeepNestingIsRefusedWithoutRecursion) {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  auto j = ParseJson(deep);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("nested too deeply"), std::string::npos) << j.status().message();
  const std::string objs = [] {
    std::string s;
    for (int i = 0; i < 100000; ++i) s += "{\"a\":";
    return s;
  }();
  EXPECT_FALSE(ParseJson(objs).ok());
}

}  // namespace
}  // namespace cqlstream::store
