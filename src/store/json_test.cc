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

}  // namespace
}  // namespace cqlstream::store
