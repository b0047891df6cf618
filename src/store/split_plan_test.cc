// Copyright (c) cqlstream authors.
#include "store/split_plan.h"

#include <gtest/gtest.h>

namespace cqlstream::store {
namespace {

SegRow Row(int32_t seg, const std::string& split, const std::string& source_id, const std::string& fingerprint,
           const std::string& state, int64_t count = 0, int64_t next_pos = 0) {
  SegRow g;
  g.seg = seg;
  g.split = split;
  g.source_id = source_id;
  g.fingerprint = fingerprint;
  g.state = state;
  g.c.count = count;
  g.c.next_pos = next_pos;
  g.writetime = 1000 + seg;
  return g;
}

std::vector<int32_t> Segs(const std::vector<SegRow>& rows) {
  std::vector<int32_t> out;
  for (const auto& g : rows) out.push_back(g.seg);
  return out;
}

std::vector<SourceItem> Items(int n) {
  std::vector<SourceItem> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    out[static_cast<size_t>(i)].path = "p" + std::to_string(i);
    out[static_cast<size_t>(i)].image.size = static_cast<uint64_t>(10 * (i + 1));
  }
  return out;
}

std::vector<const SourceItem*> Ptrs(const std::vector<SourceItem>& v) {
  std::vector<const SourceItem*> out;
  for (const auto& it : v) out.push_back(&it);
  return out;
}

TEST(SplitPlanTest, NoSegmentOfTheSourceIsNew) {
  // Another source in the same split, the same source in another split.
  const std::vector<SegRow> rows = {Row(0, "train", "other", "f", "sealed"), Row(1, "val", "src", "f", "open")};
  const SplitDecision d = DecideSplit(rows, "train", "src", "f");
  EXPECT_EQ(d.action, SplitAction::kNew);
  EXPECT_FALSE(d.segment.has_value());
  EXPECT_TRUE(d.exclude.empty());
  EXPECT_TRUE(d.supersede.empty());
  EXPECT_TRUE(d.check_foreign);
  EXPECT_EQ(DecideSplit({}, "train", "src", "f").action, SplitAction::kNew);
}

TEST(SplitPlanTest, SameFingerprintSealedIsComplete) {
  const std::vector<SegRow> rows = {Row(0, "train", "src", "old", "sealed", 5, 5),
                                    Row(3, "train", "src", "f", "sealed", 7, 8)};
  const SplitDecision d = DecideSplit(rows, "train", "src", "f");
  EXPECT_EQ(d.action, SplitAction::kComplete);
  ASSERT_TRUE(d.segment.has_value());
  EXPECT_EQ(d.segment->seg, 3);
  EXPECT_TRUE(d.exclude.empty());  // nothing is listed for a complete split
  EXPECT_FALSE(d.check_foreign);

  const auto items = Items(8);
  auto p = SettleSplit(d, "train", "src", "f", Ptrs(items), "ds");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->action, SplitAction::kComplete);
  EXPECT_EQ(p->seg, 3);
  EXPECT_EQ(p->start.count, 7);
  EXPECT_TRUE(p->items.empty());
  EXPECT_EQ(p->remaining(), 0u);
  EXPECT_FALSE(p->writes());
  EXPECT_STREQ(SplitActionName(p->action), "complete");
}

TEST(SplitPlanTest, SameFingerprintOpenIsResumedAndOthersExcluded) {
  const std::vector<SegRow> rows = {Row(0, "train", "src", "old", "sealed", 4, 4),
                                    Row(1, "train", "src", "f", "open", 2, 3),
                                    Row(2, "train", "src", "older", "open", 1, 1)};
  const SplitDecision d = DecideSplit(rows, "train", "src", "f");
  EXPECT_EQ(d.action, SplitAction::kResume);
  ASSERT_TRUE(d.segment.has_value());
  EXPECT_EQ(d.segment->seg, 1);
  EXPECT_EQ(Segs(d.exclude), (std::vector<int32_t>{0, 2}));
  EXPECT_TRUE(d.supersede.empty());
  EXPECT_FALSE(d.check_foreign);  // a resume continues what was allowed

  const auto items = Items(5);
  auto p = SettleSplit(d, "train", "src", "f", Ptrs(items), "ds");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->action, SplitAction::kResume);
  EXPECT_EQ(p->seg, 1);
  EXPECT_EQ(p->writetime, 1001);
  EXPECT_EQ(p->remaining(), 2u);              // positions 3 and 4
  EXPECT_EQ(p->remaining_bytes(), 40 + 50);   // listed sizes of items 3 and 4
  EXPECT_TRUE(p->writes());
}

TEST(SplitPlanTest, TheLatestSegmentWithTheFingerprintCounts) {
  const std::vector<SegRow> rows = {Row(0, "train", "src", "f", "open"), Row(4, "train", "src", "f", "open")};
  const SplitDecision d = DecideSplit(rows, "train", "src", "f");
  EXPECT_EQ(d.action, SplitAction::kResume);
  EXPECT_EQ(d.segment->seg, 4);
  EXPECT_EQ(Segs(d.exclude), (std::vector<int32_t>{0}));
}

TEST(SplitPlanTest, ResumeThatDoesNotFitTheListingIsCorruption) {
  const auto items = Items(3);
  for (const auto& [count, next_pos] : std::vector<std::pair<int64_t, int64_t>>{{2, 4}, {3, 2}, {-5, -5}, {0, -1}}) {
    const SplitDecision d = DecideSplit({Row(6, "train", "src", "f", "open", count, next_pos)}, "train", "src", "f");
    auto p = SettleSplit(d, "train", "src", "f", Ptrs(items), "ds");
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), Status::Code::kCorruption);
    EXPECT_NE(p.status().message().find("segment 6 of dataset 'ds'"), std::string::npos) << p.status().ToString();
  }
}

TEST(SplitPlanTest, ChangedListingIsAnAppendThatSupersedesOpenSegments) {
  const std::vector<SegRow> rows = {Row(0, "train", "src", "a", "sealed", 3, 3),
                                    Row(1, "train", "src", "b", "open", 1, 1),
                                    Row(2, "train", "other", "c", "open")};
  const SplitDecision d = DecideSplit(rows, "train", "src", "new");
  EXPECT_EQ(d.action, SplitAction::kAppend);
  EXPECT_FALSE(d.segment.has_value());
  EXPECT_EQ(Segs(d.exclude), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(Segs(d.supersede), (std::vector<int32_t>{1}));
  EXPECT_TRUE(d.check_foreign);

  const auto items = Items(2);
  auto p = SettleSplit(d, "train", "src", "new", Ptrs(items), "ds");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->action, SplitAction::kAppend);
  EXPECT_EQ(p->seg, -1);  // claimed when it is written
  EXPECT_EQ(Segs(p->supersede), (std::vector<int32_t>{1}));
  EXPECT_EQ(p->remaining(), 2u);
  EXPECT_STREQ(SplitActionName(p->action), "appended");

  // Every path already committed: nothing new, nothing written.
  auto none = SettleSplit(d, "train", "src", "new", {}, "ds");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->action, SplitAction::kNothingNew);
  EXPECT_FALSE(none->writes());
  EXPECT_STREQ(SplitActionName(none->action), "nothing new");
}

TEST(SplitPlanTest, ListedSizeCountsTheTargetAndIsNeverZero) {
  SourceItem it;
  EXPECT_EQ(ListedSize(it), 1);
  it.image.size = 100;
  it.target = ByteRef{};
  it.target->size = 20;
  EXPECT_EQ(ListedSize(it), 120);
}

}  // namespace
}  // namespace cqlstream::store
