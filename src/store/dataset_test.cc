// Copyright (c) cqlstream authors.
//
// Tests of include/cqlstream/dataset.h as implemented in dataset.cc: sample
// keys, identifier rules, selection files (round trip and corruption).
#include "cqlstream/dataset.h"

#include <gtest/gtest.h>

#include "store/testing_fixtures.h"

namespace cqlstream {
namespace {

using store::testing::ReadFile;
using store::testing::TempDir;
using store::testing::WriteFile;

TEST(DatasetTest, KeysPackSegmentAndIndex) {
  const SampleKey k = MakeKey(3, 1025);
  EXPECT_EQ(KeySegment(k), 3);
  EXPECT_EQ(KeyIndex(k), 1025);
  EXPECT_EQ(k, (uint64_t{3} << 32) | 1025);
  EXPECT_EQ(FormatKey(k), "3:1025");
  EXPECT_LT(MakeKey(0, 2000000000), MakeKey(1, 0));
}

TEST(DatasetTest, IdentifierRules) {
  EXPECT_TRUE(ValidateDatasetName("fashion_mnist").ok());
  EXPECT_TRUE(ValidateDatasetName(std::string(24, 'a')).ok());
  EXPECT_FALSE(ValidateDatasetName(std::string(25, 'a')).ok());
  for (const char* bad : {"", "1abc", "_x", "Abc", "a-b", "a b", "a;drop", "é"}) {
    auto st = ValidateDatasetName(bad);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  }
  EXPECT_TRUE(ValidateKeyspaceName(std::string(32, 'k')).ok());
  EXPECT_FALSE(ValidateKeyspaceName(std::string(33, 'k')).ok());
  EXPECT_NE(ValidateKeyspaceName("X").message().find("lowercase"), std::string::npos);
}

Selection Sample() {
  Selection s;
  s.dataset = "pets";
  s.split = "train";
  s.created = "2024-05-01T10:00:00Z";
  s.query = "labels=cat \"quoted\"\tfraction=0.5";
  s.keys = {MakeKey(0, 0), MakeKey(0, 5), MakeKey(0, 1000000), MakeKey(2, 7), MakeKey(7, 0)};
  return s;
}

TEST(SelectionTest, RoundTrip) {
  TempDir dir("sel");
  const std::string path = (dir / "s.sel").string();
  const Selection s = Sample();
  ASSERT_TRUE(s.Save(path).ok());
  auto l = Selection::Load(path);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->dataset, "pets");
  EXPECT_EQ(l->split, "train");
  EXPECT_EQ(l->created, s.created);
  EXPECT_EQ(l->query, s.query);
  EXPECT_EQ(l->keys, s.keys);
  // Empty selections are valid too.
  Selection e = s;
  e.keys.clear();
  ASSERT_TRUE(e.Save(path).ok());
  auto le = Selection::Load(path);
  ASSERT_TRUE(le.ok());
  EXPECT_TRUE(le->keys.empty());
}

TEST(SelectionTest, SaveRefusesUnsortedKeys) {
  TempDir dir("sel");
  Selection s = Sample();
  std::swap(s.keys[0], s.keys[1]);
  EXPECT_FALSE(s.Save((dir / "x.sel").string()).ok());
  s = Sample();
  s.keys.push_back(s.keys.back());
  EXPECT_FALSE(s.Save((dir / "x.sel").string()).ok());
}

TEST(SelectionTest, CorruptionIsDetected) {
  TempDir dir("sel");
  const std::string path = (dir / "s.sel").string();
  ASSERT_TRUE(Sample().Save(path).ok());
  const auto good = ReadFile(path);

  auto expect_corrupt = [&](std::vector<uint8_t> bytes, std::string_view what) {
    WriteFile(path, bytes);
    auto l = Selection::Load(path);
    ASSERT_FALSE(l.ok()) << what;
    EXPECT_EQ(l.status().code(), Status::Code::kCorruption) << what << ": " << l.status().ToString();
  };
  auto b = good;
  b[0] = 'X';
  expect_corrupt(b, "magic");
  b = good;
  b.resize(good.size() - 1);
  expect_corrupt(b, "truncated body");
  b = good;
  b.push_back(0);
  expect_corrupt(b, "trailing byte");
  b = good;
  b.resize(20);
  expect_corrupt(b, "truncated header");
  // A count in the header that does not match the body.
  std::string text(good.begin(), good.end());
  const size_t at = text.find("\"count\": 5");
  ASSERT_NE(at, std::string::npos);
  text[at + 9] = '4';
  expect_corrupt(std::vector<uint8_t>(text.begin(), text.end()), "count");

  WriteFile(path, std::string_view("CQLSSEL1\x05\x00\x00\x00{bad}", 17));
  EXPECT_FALSE(Selection::Load(path).ok());
  EXPECT_EQ(Selection::Load((dir / "missing.sel").string()).status().code(), Status::Code::kIOError);
}

TEST(SelectionTest, OtherLayoutVersionsAreRefused) {
  TempDir dir("sel");
  const std::string path = (dir / "s.sel").string();
  Selection s = Sample();
  s.layout_version = 2;
  ASSERT_TRUE(s.Save(path).ok());
  auto l = Selection::Load(path);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), Status::Code::kUnsupported);
}

}  // namespace
}  // namespace cqlstream
