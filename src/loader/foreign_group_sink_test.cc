// Copyright (c) cqlstream authors.
#include "loader/foreign_group_sink.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "loader/recording_sink_test_util.h"

namespace cqlstream::loader {
namespace {

// A member's sink: the data cell (column 0 after the key) is placed.
std::shared_ptr<testing::RecordingSink> GroupMember() { return std::make_shared<testing::RecordingSink>(0); }

cql::ByteView View(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

cql::RowsMetadata Columns(int32_t n) {
  cql::RowsMetadata m;
  m.column_count = n;
  return m;
}

// Feeds one row (key, data, label) as the decoder does.
void FeedRow(ForeignGroupSink& s, int32_t row, const std::string& key, uint8_t fill) {
  ASSERT_TRUE(s.OnCell(row, 0, View(key)).ok());
  const std::vector<uint8_t> data(3, fill);
  auto dst = s.CellDestination(row, 1, 3);
  if (!dst.empty()) {
    std::copy(data.begin(), data.end(), dst.begin());
    ASSERT_TRUE(s.OnCell(row, 1, cql::ByteView(dst)).ok());
  } else {
    ASSERT_TRUE(s.OnCell(row, 1, cql::ByteView(data)).ok());
  }
  const std::vector<uint8_t> label = {0, 0, 0, fill};
  ASSERT_TRUE(s.OnCell(row, 2, cql::ByteView(label)).ok());
}

TEST(ForeignGroupSinkTest, PassesEachRowToTheSampleOfItsKey) {
  auto a = GroupMember(), b = GroupMember(), c = GroupMember();
  ForeignGroupSink s({{"key-a", a}, {"key-b", b}, {"key-c", c}}, 3);
  ASSERT_TRUE(s.OnRowsBegin(Columns(3), 2).ok());
  FeedRow(s, 0, "key-b", 0xbb);  // the server's order, not the caller's
  FeedRow(s, 1, "key-a", 0xaa);
  EXPECT_TRUE(s.error().ok()) << s.error().ToString();
  EXPECT_EQ(s.rows_of(0), 1);
  EXPECT_EQ(s.rows_of(1), 1);
  EXPECT_EQ(s.rows_of(2), 0);  // not in the answer: the caller sees it missing
  EXPECT_TRUE(c->cells.empty());
  EXPECT_TRUE(c->begins.empty());
  // Each member sees its row as row 0 of a single read: data, then label.
  EXPECT_EQ(a->begins, std::vector<int32_t>{1});
  ASSERT_EQ(a->cells.size(), 2u);
  EXPECT_EQ(a->cells[0].row, 0);
  EXPECT_EQ(a->cells[0].col, 0);
  EXPECT_EQ(a->cells[1].col, 1);
  EXPECT_EQ(a->cells[1].bytes, (std::vector<uint8_t>{0, 0, 0, 0xaa}));
  EXPECT_EQ(a->dest, (std::vector<std::pair<int32_t, int32_t>>{{0, 0}}));
  EXPECT_EQ(a->buf, std::vector<uint8_t>(3, 0xaa));
  EXPECT_EQ(b->buf, std::vector<uint8_t>(3, 0xbb));
}

// A data cell the decoder gives up on (its connection closed mid-cell)
// reaches the member whose destination it was, in the member's columns;
// nothing else does.
TEST(ForeignGroupSinkTest, AnAbandonedCellReachesTheMemberItWasPlacedFor) {
  auto a = GroupMember(), b = GroupMember();
  ForeignGroupSink s({{"key-a", a}, {"key-b", b}}, 3);
  ASSERT_TRUE(s.OnRowsBegin(Columns(3), 2).ok());
  FeedRow(s, 0, "key-a", 0xaa);
  s.OnCellAbandoned(1, 1);  // row 1's key has not come: no member
  ASSERT_TRUE(s.OnCell(1, 0, View("key-b")).ok());
  ASSERT_FALSE(s.CellDestination(1, 1, 3).empty());
  s.OnCellAbandoned(1, 1);
  EXPECT_TRUE(a->abandoned.empty());
  EXPECT_EQ(b->abandoned, (std::vector<std::pair<int32_t, int32_t>>{{0, 0}}));
}

TEST(ForeignGroupSinkTest, AKeyNotAskedForFailsTheAnswerAndNothingMoreIsPassed) {
  auto a = GroupMember(), b = GroupMember();
  ForeignGroupSink s({{std::string("\x01\x02", 2), a}, {std::string("\x03\x04", 2), b}}, 3);
  FeedRow(s, 0, std::string("\x01\x02", 2), 0x11);
  FeedRow(s, 1, std::string("\x09\x09", 2), 0x99);  // not asked for
  FeedRow(s, 2, std::string("\x03\x04", 2), 0x33);  // after the error: not passed on
  EXPECT_EQ(s.error().code(), Status::Code::kCorruption);
  EXPECT_NE(s.error().message().find("0909"), std::string::npos) << s.error().ToString();
  EXPECT_EQ(a->cells.size(), 2u);
  EXPECT_TRUE(b->cells.empty());
  EXPECT_TRUE(b->dest.empty());
  EXPECT_TRUE(s.CellDestination(2, 1, 3).empty());
}

TEST(ForeignGroupSinkTest, MalformedRowsFailTheAnswer) {
  auto a = GroupMember();
  {
    ForeignGroupSink s({{"k", a}}, 3);
    ASSERT_TRUE(s.OnCell(0, 0, std::nullopt).ok());  // a null key
    EXPECT_FALSE(s.error().ok());
    EXPECT_TRUE(s.CellDestination(0, 1, 3).empty());
  }
  {
    ForeignGroupSink s({{"k", a}}, 3);
    const std::vector<uint8_t> data = {1, 2, 3};
    ASSERT_TRUE(s.OnCell(0, 1, cql::ByteView(data)).ok());  // a row without its key first
    EXPECT_FALSE(s.error().ok());
  }
  EXPECT_TRUE(a->cells.empty());
}

// An answer of other columns than the read's (a key lookup's seg, idx and
// key, say, sent twice by a server and reaching this read's stream id) is
// refused before a cell is passed, even when its first cell is the key.
TEST(ForeignGroupSinkTest, AnAnswerOfOtherColumnsIsRefusedWhole) {
  for (const int32_t columns : {0, 2, 4}) {
    auto a = GroupMember();
    ForeignGroupSink s({{"k", a}}, 3);
    ASSERT_TRUE(s.OnRowsBegin(Columns(columns), 1).ok());
    FeedRow(s, 0, "k", 7);
    EXPECT_EQ(s.error().code(), Status::Code::kCorruption) << columns;
    EXPECT_NE(s.error().message().find("columns"), std::string::npos) << s.error().ToString();
    EXPECT_EQ(s.rows_of(0), 0);
    EXPECT_TRUE(a->cells.empty());
    EXPECT_TRUE(a->dest.empty());
  }
}

TEST(ForeignGroupSinkTest, TwoRowsOfOneKeyAreCountedAndNumbered) {
  auto a = GroupMember();
  ForeignGroupSink s({{"k", a}}, 3);
  FeedRow(s, 0, "k", 1);
  FeedRow(s, 1, "k", 2);
  EXPECT_TRUE(s.error().ok());
  EXPECT_EQ(s.rows_of(0), 2);  // the caller hands the count on: a single read's check refuses it
  EXPECT_EQ(a->begins, std::vector<int32_t>{1});
  ASSERT_EQ(a->cells.size(), 4u);
  EXPECT_EQ(a->cells[2].row, 1);
}

}  // namespace
}  // namespace cqlstream::loader
