// Copyright (c) cqlstream authors.
#include "loader/coalesce.h"

#include <gtest/gtest.h>

#include <map>

#include "loader/recording_sink_test_util.h"
#include "store/sample_row.h"

namespace cqlstream::loader {
namespace {

TEST(CoalesceTest, OnlySmallOneRowSamplesShareRequests) {
  EXPECT_TRUE(Coalescible(540, 1 << 20));
  EXPECT_TRUE(Coalescible(0, 4096));
  EXPECT_TRUE(Coalescible(kCoalesceMaxSampleBytes, 1 << 20));
  EXPECT_FALSE(Coalescible(kCoalesceMaxSampleBytes + 1, 1 << 20));
  EXPECT_FALSE(Coalescible(5000, 4096));  // two chunks: two rows
  EXPECT_FALSE(Coalescible(-1, 4096));    // unknown size
  EXPECT_FALSE(Coalescible(100, 0));      // unknown chunk size
}

TEST(CoalesceTest, CapFollowsOptionAndWindow) {
  EXPECT_EQ(CoalesceCap(0, 1000), kDefaultCoalesce);
  EXPECT_EQ(CoalesceCap(0, 32), 8);  // a quarter of the window
  EXPECT_EQ(CoalesceCap(1, 1000), 1);
  EXPECT_EQ(CoalesceCap(100, 1000), 100);
  EXPECT_EQ(CoalesceCap(0, 2), 1);
  EXPECT_TRUE(CheckCoalesceOption(0).ok());
  EXPECT_TRUE(CheckCoalesceOption(kMaxCoalesce).ok());
  EXPECT_FALSE(CheckCoalesceOption(-1).ok());
  EXPECT_FALSE(CheckCoalesceOption(kMaxCoalesce + 1).ok());
}

TEST(CoalesceTest, GroupsBySegmentInIssueOrder) {
  SegmentGrouper<int> g(3);
  std::vector<std::vector<int>> full;
  const int segs[] = {0, 1, 0, 2, 0, 1, 0, 0, 0};
  for (int i = 0; i < 9; ++i) {
    if (auto f = g.Add(segs[i], i)) full.push_back(*f);
  }
  ASSERT_EQ(full.size(), 2u);
  EXPECT_EQ(full[0], (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(full[1], (std::vector<int>{6, 7, 8}));
  auto rest = g.TakeAll();
  ASSERT_EQ(rest.size(), 2u);  // segment 0's group was handed out and not reopened
  EXPECT_EQ(rest[0], (std::vector<int>{1, 5}));
  EXPECT_EQ(rest[1], (std::vector<int>{3}));
  EXPECT_TRUE(g.TakeAll().empty());
  // Every item exactly once.
  SegmentGrouper<int> one(1);
  EXPECT_EQ(*one.Add(4, 7), std::vector<int>{7});
  EXPECT_TRUE(one.TakeAll().empty());
}

TEST(CoalesceTest, GroupsBySegmentAndReplicaSet) {
  // Segment 0 on replica sets 7 and 9, segment 1 on 7: three groups; the
  // same replica set in another segment is another group (one seg = ? each).
  SegmentGrouper<int> g(2);
  std::vector<std::vector<int>> full;
  const std::pair<int32_t, uint64_t> where[] = {{0, 7}, {0, 9}, {1, 7}, {0, 9}, {1, 7}, {0, 7}};
  for (int i = 0; i < 6; ++i) {
    if (auto f = g.Add(where[i].first, i, 0, where[i].second)) full.push_back(*f);
  }
  ASSERT_EQ(full.size(), 3u);
  EXPECT_EQ(full[0], (std::vector<int>{1, 3}));
  EXPECT_EQ(full[1], (std::vector<int>{2, 4}));
  EXPECT_EQ(full[2], (std::vector<int>{0, 5}));
  EXPECT_TRUE(g.TakeAll().empty());
  // Unknown replicas (0) group by segment alone, as on one node.
  SegmentGrouper<int> one(8);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(one.Add(5, i));
  auto rest = one.TakeAll();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0], (std::vector<int>{0, 1, 2}));
}

TEST(CoalesceTest, GroupsHoldAtMostHalfAMebibyteOfSamples) {
  // 16 KiB samples: 32 per group, not 64 or 100 (1.6 MiB, cut by a 1 MiB page).
  EXPECT_EQ(GroupLimitForSize(kCoalesceMaxSampleBytes), 32u);
  EXPECT_EQ(GroupLimitForSize(800), static_cast<size_t>(kCoalesceMaxGroupBytes / 800));
  EXPECT_EQ(GroupLimitForSize(int64_t{1} << 30), 1u);
  EXPECT_EQ(GroupLimitForSize(0), 0u);  // no limit by size
  SegmentGrouper<int> g(100);
  std::vector<std::vector<int>> full;
  for (int i = 0; i < 70; ++i) {
    if (auto f = g.Add(0, i, GroupLimitForSize(kCoalesceMaxSampleBytes))) full.push_back(*f);
  }
  ASSERT_EQ(full.size(), 2u);
  EXPECT_EQ(full[0].size(), 32u);
  EXPECT_EQ(full[1].size(), 32u);
  auto rest = g.TakeAll();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].size(), 6u);
  // The limit never raises the cap.
  SegmentGrouper<int> small(4);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(small.Add(0, i, 32));
  EXPECT_EQ(small.Add(0, 3, 32)->size(), 4u);
}

// A member's sink: the data cell is placed.
std::shared_ptr<testing::RecordingSink> Member() {
  return std::make_shared<testing::RecordingSink>(store::kColData);
}

std::vector<uint8_t> IntCell(int32_t v) {
  return {static_cast<uint8_t>(v >> 24), static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 8),
          static_cast<uint8_t>(v)};
}

// Feeds one row (seg, idx, a size cell, a data cell) as the decoder does.
void FeedRow(CoalescedSink& s, int32_t row, int32_t seg, int32_t idx, uint8_t fill) {
  auto sc = IntCell(seg), ic = IntCell(idx);
  ASSERT_TRUE(s.OnCell(row, store::kColSeg, cql::ByteView(sc)).ok());
  ASSERT_TRUE(s.OnCell(row, store::kColIdx, cql::ByteView(ic)).ok());
  std::vector<uint8_t> size(8, 0);
  size[7] = 3;
  ASSERT_TRUE(s.OnCell(row, store::kColSize, cql::ByteView(size)).ok());
  auto dst = s.CellDestination(row, store::kColData, 3);
  const std::vector<uint8_t> data(3, fill);
  if (!dst.empty()) {
    std::copy(data.begin(), data.end(), dst.begin());
    ASSERT_TRUE(s.OnCell(row, store::kColData, cql::ByteView(dst)).ok());
  } else {
    ASSERT_TRUE(s.OnCell(row, store::kColData, cql::ByteView(data)).ok());
  }
}

TEST(CoalesceTest, SinkPassesEachRowToItsSample) {
  auto a = Member(), b = Member(), c = Member();
  CoalescedSink s({{MakeKey(2, 9), a}, {MakeKey(2, 1), b}, {MakeKey(2, 5), c}});
  ASSERT_TRUE(s.OnRowsBegin(cql::RowsMetadata{}, 2).ok());
  FeedRow(s, 0, 2, 1, 0xbb);  // the server's order, not the caller's
  FeedRow(s, 1, 2, 9, 0xaa);
  EXPECT_TRUE(s.error().ok());
  EXPECT_EQ(s.rows_of(0), 1);
  EXPECT_EQ(s.rows_of(1), 1);
  EXPECT_EQ(s.rows_of(2), 0);  // not in the answer: the caller sees it missing
  EXPECT_TRUE(c->cells.empty());
  // Each member sees its row as row 0, with its own key cells first.
  ASSERT_EQ(a->cells.size(), 4u);
  EXPECT_EQ(a->cells[0].row, 0);
  EXPECT_EQ(a->cells[0].col, store::kColSeg);
  EXPECT_EQ(a->cells[0].bytes, IntCell(2));
  EXPECT_EQ(a->cells[1].bytes, IntCell(9));
  EXPECT_EQ(a->dest_rows(), std::vector<int32_t>{0});
  EXPECT_EQ(a->buf, std::vector<uint8_t>(3, 0xaa));
  EXPECT_EQ(b->buf, std::vector<uint8_t>(3, 0xbb));
}

// A data cell the decoder gives up on (its connection closed mid-cell)
// reaches the member whose destination it was, under that member's row;
// nothing else does.
TEST(CoalesceTest, AnAbandonedCellReachesTheMemberItWasPlacedFor) {
  auto a = Member(), b = Member();
  CoalescedSink s({{MakeKey(2, 9), a}, {MakeKey(2, 1), b}});
  ASSERT_TRUE(s.OnRowsBegin(cql::RowsMetadata{}, 3).ok());
  FeedRow(s, 0, 2, 1, 0xbb);
  s.OnCellAbandoned(1, store::kColData);  // row 1's key cells have not come: no member
  auto sc = IntCell(2), ic = IntCell(1);
  ASSERT_TRUE(s.OnCell(1, store::kColSeg, cql::ByteView(sc)).ok());
  ASSERT_TRUE(s.OnCell(1, store::kColIdx, cql::ByteView(ic)).ok());
  ASSERT_FALSE(s.CellDestination(1, store::kColData, 3).empty());
  s.OnCellAbandoned(1, store::kColData);
  EXPECT_TRUE(a->abandoned.empty());
  EXPECT_EQ(b->abandoned, (std::vector<std::pair<int32_t, int32_t>>{{1, store::kColData}}));  // b's second row
}

TEST(CoalesceTest, ARowOfAnotherSampleFailsTheRequestAndIsNotPlaced) {
  auto a = Member(), b = Member();
  CoalescedSink s({{MakeKey(0, 1), a}, {MakeKey(0, 2), b}});
  FeedRow(s, 0, 0, 1, 0x11);
  FeedRow(s, 1, 0, 3, 0x33);  // not asked for
  FeedRow(s, 2, 0, 2, 0x22);  // after the error: nothing more is passed on
  EXPECT_EQ(s.error().code(), Status::Code::kCorruption);
  EXPECT_NE(s.error().message().find("0:3"), std::string::npos) << s.error().ToString();
  EXPECT_EQ(a->cells.size(), 4u);
  EXPECT_TRUE(b->cells.empty());
  EXPECT_TRUE(b->dest_rows().empty());
}

TEST(CoalesceTest, MalformedKeyCellsFailTheRequest) {
  auto a = Member();
  CoalescedSink s({{MakeKey(0, 1), a}});
  const std::vector<uint8_t> three(3, 0);
  ASSERT_TRUE(s.OnCell(0, store::kColSeg, cql::ByteView(three)).ok());
  auto ic = IntCell(1);
  ASSERT_TRUE(s.OnCell(0, store::kColIdx, cql::ByteView(ic)).ok());
  EXPECT_EQ(s.error().code(), Status::Code::kCorruption);
  EXPECT_TRUE(s.CellDestination(0, store::kColData, 3).empty());
  EXPECT_TRUE(a->cells.empty());
  CoalescedSink n({{MakeKey(0, 1), a}});
  auto sc = IntCell(0);
  ASSERT_TRUE(n.OnCell(0, store::kColSeg, cql::ByteView(sc)).ok());
  ASSERT_TRUE(n.OnCell(0, store::kColIdx, std::nullopt).ok());
  EXPECT_FALSE(n.error().ok());
}

TEST(CoalesceTest, SeveralRowsOfOneSampleAreNumberedFromZero) {
  auto a = Member();
  CoalescedSink s({{MakeKey(1, 1), a}});
  FeedRow(s, 0, 1, 1, 1);
  FeedRow(s, 1, 1, 1, 2);
  EXPECT_TRUE(s.error().ok());
  EXPECT_EQ(s.rows_of(0), 2);
  EXPECT_EQ(a->dest_rows(), (std::vector<int32_t>{0, 1}));
}

}  // namespace
}  // namespace cqlstream::loader
