// Copyright (c) cqlstream authors.
#include "util/escape.h"

#include <gtest/gtest.h>

#include <string>

namespace cqlstream {
namespace {

TEST(PrintableText, KeepsPlainAndUtf8Text) {
  EXPECT_EQ(PrintableText("train/cat/c1.png"), "train/cat/c1.png");
  EXPECT_EQ(PrintableText("Ünïcødé 猫 🐈"), "Ünïcødé 猫 🐈");
  EXPECT_EQ(PrintableText(""), "");
}

TEST(PrintableText, EscapesC0AndDel) {
  EXPECT_EQ(PrintableText("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(PrintableText("\x1b[2J\x1b]0;owned\x07"), "\\x1b[2J\\x1b]0;owned\\x07");
  EXPECT_EQ(PrintableText(std::string("x\0y", 3)), "x\\x00y");
  EXPECT_EQ(PrintableText("\x7f"), "\\x7f");
}

TEST(PrintableText, EscapesC1AsCodePoints) {
  EXPECT_EQ(PrintableText("\xc2\x9b" "31m"), "\\u009b31m");  // CSI
  EXPECT_EQ(PrintableText("\xc2\x80\xc2\x9f"), "\\u0080\\u009f");
  EXPECT_EQ(PrintableText("\xc2\xa0"), "\xc2\xa0");  // NBSP is printable
}

TEST(PrintableText, EscapesInvalidUtf8ByteByByte) {
  EXPECT_EQ(PrintableText("\x9b"), "\\x9b");              // a raw 8-bit C1 byte
  EXPECT_EQ(PrintableText("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(PrintableText("\xc3"), "\\xc3");              // cut sequence
  EXPECT_EQ(PrintableText("\xc0\xaf"), "\\xc0\\xaf");     // overlong '/'
  EXPECT_EQ(PrintableText("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // surrogate
  EXPECT_EQ(PrintableText("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // > U+10FFFF
}

TEST(PrintableText, BackslashIsEscapedSoOutputIsUnambiguous) {
  EXPECT_EQ(PrintableText("a\\x1b"), "a\\\\x1b");
  EXPECT_NE(PrintableText("\\x1b"), PrintableText("\x1b"));
}

}  // namespace
}  // namespace cqlstream
