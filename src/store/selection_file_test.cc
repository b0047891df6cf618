// Copyright (c) cqlstream authors.
//
// Tests of selection files (selection_file.cc): round trips of sorted
// (CQLSSEL1) and ordered (CQLSSEL2) selections, corruption, hostile headers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <filesystem>

#include "cqlstream/dataset.h"
#include "store/testing_fixtures.h"

namespace cqlstream {
namespace {

using store::testing::ReadFile;
using store::testing::TempDir;
using store::testing::WriteFile;

Selection Sample() {
  Selection s;
  s.dataset = "pets";
  s.split = "train";
  s.created = "2024-05-01T10:00:00Z";
  s.query = "labels=cat \"quoted\"\tfraction=0.5";
  s.keys = {MakeKey(0, 0), MakeKey(0, 5), MakeKey(0, 1000000), MakeKey(2, 7), MakeKey(7, 0)};
  return s;
}

// A selection file with the given header text and no keys.
std::string WithHeader(std::string_view header, char version = '1') {
  std::string out("CQLSSEL1", 8);
  out[7] = version;
  const uint32_t n = static_cast<uint32_t>(header.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += header;
  return out;
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

// Issue 11: a selection may fix an order and repeat keys; such a file is
// CQLSSEL2 and loads back with the same keys in the same order.
TEST(SelectionTest, OrderedSelectionsWithRepeatsRoundTrip) {
  TempDir dir("sel");
  const std::string path = (dir / "o.sel").string();
  Selection s = Sample();
  s.keys = {MakeKey(2, 7), MakeKey(0, 5), MakeKey(0, 5), MakeKey(0, 1000000), MakeKey(0, 0),
            MakeKey(7, 0), MakeKey(2, 7), MakeKey(0, INT32_MAX), MakeKey(0, 0)};
  EXPECT_FALSE(s.SortedUnique());
  ASSERT_TRUE(s.Save(path).ok());
  const auto bytes = ReadFile(path);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), "CQLSSEL2");
  auto l = Selection::Load(path);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->keys, s.keys);
  EXPECT_EQ(l->query, s.query);
  // Sorted unique keys keep the older format, which older releases read.
  const Selection sorted = Sample();
  EXPECT_TRUE(sorted.SortedUnique());
  EXPECT_EQ(sorted.Encode().substr(0, 8), "CQLSSEL1");
  EXPECT_EQ(sorted.Encode().find("ordered"), std::string::npos);
  // A single repeat is enough to need the ordered format.
  Selection rep = sorted;
  rep.keys.push_back(rep.keys.back());
  EXPECT_EQ(rep.Encode().substr(0, 8), "CQLSSEL2");
  auto lr = Selection::Parse(rep.Encode(), "rep.sel");
  ASSERT_TRUE(lr.ok()) << lr.status().ToString();
  EXPECT_EQ(lr->keys, rep.keys);
  // Negative segments or indices cannot be written.
  Selection neg = sorted;
  neg.keys = {MakeKey(-1, 0)};
  EXPECT_EQ(neg.Save(path).code(), Status::Code::kInvalidArgument);
}

// The magic and the header's "ordered" must agree, so that a file never
// reads with the other body's rules.
TEST(SelectionTest, MagicAndOrderedFlagMustAgree) {
  Selection s = Sample();
  std::string sorted = s.Encode();
  std::string as_ordered = sorted;
  as_ordered[7] = '2';
  auto l = Selection::Parse(as_ordered, "x.sel");
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("ordered"), std::string::npos) << l.status().message();
  s.keys = {MakeKey(0, 3), MakeKey(0, 1)};
  std::string ordered = s.Encode();
  ordered[7] = '1';
  l = Selection::Parse(ordered, "x.sel");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), Status::Code::kCorruption);
  // An index that a zigzag delta drives below zero.
  std::string neg = WithHeader(R"({"layout_version": 1, "count": 1, "segments": 1, "ordered": true})", '2');
  neg += std::string("\0\0\0\0\1\0\0\0\x01", 9);  // seg 0, 1 key, zigzag(-1)
  l = Selection::Parse(neg, "x.sel");
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("index out of range"), std::string::npos) << l.status().message();
  // A run claiming more keys than the file holds.
  std::string big = WithHeader(R"({"layout_version": 1, "count": 1, "segments": 1, "ordered": true})", '2');
  big += std::string("\0\0\0\0\xff\xff\xff\x7f\x02", 9);
  EXPECT_EQ(Selection::Parse(big, "x.sel").status().code(), Status::Code::kCorruption);
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

// Issue 9 item 3: a \u escape with non-hex digits reached std::stoi (SIGABRT
// in the CLI); headers are now parsed by nlohmann/json and checked field by field.
TEST(SelectionTest, HostileHeadersAreCorruptionNotExceptions) {
  TempDir dir("sel");
  const std::string path = (dir / "s.sel").string();
  const std::string fields = R"("layout_version": 1, "count": 0, "segments": 0)";
  for (std::string header :
       {std::string(R"({"dataset": "\uZZZZ", )") + fields + "}", std::string(R"({"dataset": "\u12"})"),
        std::string("{\"dataset\": \"\xff\xfe\", ") + fields + "}",
        std::string(R"({"layout_version": "1", "count": 0, "segments": 0})"),
        std::string(R"({"layout_version": 99999999999999999999999, "count": 0, "segments": 0})"),
        std::string(R"({"layout_version": 1, "count": -1, "segments": 0})"),
        std::string(R"({"layout_version": 1, "count": 0})"), std::string(R"({"dataset": 7, )") + fields + "}",
        std::string(R"([1, 2])"), std::string(100000, '[') + std::string(100000, ']'),
        std::string(R"({"layout_version": 1e400, "count": 0, "segments": 0})")}) {
    WriteFile(path, WithHeader(header));
    StatusOr<Selection> l = Status::Internal("not loaded yet");
    EXPECT_NO_THROW(l = Selection::Load(path)) << header.substr(0, 80);
    ASSERT_FALSE(l.ok()) << header.substr(0, 80);
    EXPECT_EQ(l.status().code(), Status::Code::kCorruption) << l.status().ToString();
    EXPECT_NE(l.status().message().find(path), std::string::npos) << l.status().message();
  }
  WriteFile(path, WithHeader(std::string("{\"dataset\": \"d\", ") + fields + "}"));
  auto ok = Selection::Load(path);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->dataset, "d");
  EXPECT_TRUE(ok->keys.empty());
  // Far more segments than the bytes could hold.
  WriteFile(path, WithHeader(R"({"layout_version": 1, "count": 0, "segments": 4000000000})"));
  EXPECT_EQ(Selection::Load(path).status().code(), Status::Code::kCorruption);
}

// Issue 9 item 3: a directory given as a selection threw an iostream failure.
TEST(SelectionTest, DirectoriesAndSpecialFilesAreClearErrors) {
  TempDir dir("sel");
  StatusOr<Selection> l = Status::Internal("not loaded yet");
  EXPECT_NO_THROW(l = Selection::Load(dir.path()));
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("is a directory"), std::string::npos) << l.status().message();
  l = Selection::Load("/dev/null");
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("not a regular file"), std::string::npos) << l.status().message();
}

// Issue 9 item 21: saves go through a mkstemp file, not "<path>.tmp".
TEST(SelectionTest, SaveUsesAnUnpredictableTemporaryName) {
  TempDir dir("sel");
  const std::string path = (dir / "s.sel").string();
  // A pre-planted "<path>.tmp" link must not be followed or written.
  const std::string victim = (dir / "victim").string();
  WriteFile(victim, std::string_view("keep"));
  ASSERT_EQ(::symlink(victim.c_str(), (path + ".tmp").c_str()), 0);
  ASSERT_TRUE(Sample().Save(path).ok());
  EXPECT_EQ(ReadFile(victim), std::vector<uint8_t>({'k', 'e', 'e', 'p'}));
  auto l = Selection::Load(path);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->keys, Sample().keys);
  // Nothing else is left in the folder.
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) entries += e.path().filename() != "" ? 1 : 0;
  EXPECT_EQ(entries, 3u);  // s.sel, s.sel.tmp (the planted link), victim
  // A folder that does not exist is an IOError naming it.
  EXPECT_EQ(Sample().Save((dir / "no/such/s.sel").string()).code(), Status::Code::kIOError);
}

}  // namespace
}  // namespace cqlstream
