// Copyright (c) cqlstream authors.
#include "loader/checkpoint.h"

#include <gtest/gtest.h>

namespace cqlstream::loader {
namespace {

TEST(RangesTest, NormalizeAndSubtract) {
  EXPECT_EQ(Normalize({{5, 7}, {0, 2}, {2, 3}, {6, 9}, {4, 4}}), (Ranges{{0, 3}, {5, 9}}));
  EXPECT_EQ(Subtract({{0, 10}}, {{2, 3}, {5, 7}}), (Ranges{{0, 2}, {3, 5}, {7, 10}}));
  EXPECT_EQ(Subtract({{0, 10}, {20, 30}}, {{0, 25}}), (Ranges{{25, 30}}));
  EXPECT_EQ(Subtract({{0, 10}}, {}), (Ranges{{0, 10}}));
  EXPECT_EQ(CountPositions({{0, 3}, {10, 12}}), 5u);
}

Checkpoint Make(int rank, int world, uint64_t n, Ranges done) {
  Checkpoint c;
  c.fingerprint = 99;
  c.seed = 1;
  c.n = n;
  c.epoch = 2;
  c.world = world;
  c.rank = rank;
  c.batch_size = 4;
  c.assigned = {RankSlice(n, rank, world)};
  c.done = std::move(done);
  return c;
}

TEST(CheckpointTest, EncodeDecodeRoundTrip) {
  Checkpoint c = Make(1, 3, 100, {{34, 40}, {45, 46}});
  c.batches_delivered = 2;
  auto d = Checkpoint::Decode(c.Encode());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->assigned, c.assigned);
  EXPECT_EQ(d->done, c.done);
  EXPECT_EQ(d->batches_delivered, 2);
  EXPECT_EQ(d->epoch, 2);
  EXPECT_EQ(d->rank, 1);
}

TEST(CheckpointTest, RejectsGarbage) {
  EXPECT_FALSE(Checkpoint::Decode("hello").ok());
  std::string e = Make(0, 1, 10, {}).Encode();
  EXPECT_FALSE(Checkpoint::Decode(e.substr(0, e.size() - 1)).ok());
  EXPECT_FALSE(Checkpoint::Decode(e + "x").ok());
  std::string bad = e;
  bad[8] = 9;  // version
  auto r = Checkpoint::Decode(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kUnsupported);
}

TEST(CheckpointTest, SameWorldResumesItsOwnRemainder) {
  auto rem = RemainingFor({Make(1, 3, 99, {{33, 40}})}, 1, 3);
  ASSERT_TRUE(rem.ok());
  EXPECT_EQ(*rem, (Ranges{{40, 66}}));
}

TEST(CheckpointTest, DifferentWorldMergesAllRanksAndResplits) {
  const uint64_t n = 90;
  std::vector<Checkpoint> cps = {Make(0, 3, n, {{0, 10}}), Make(1, 3, n, {{30, 35}, {37, 38}}),
                                 Make(2, 3, n, {{60, 90}})};
  uint64_t total = 0;
  Ranges all;
  for (int r = 0; r < 2; ++r) {
    auto rem = RemainingFor(cps, r, 2);
    ASSERT_TRUE(rem.ok()) << rem.status().ToString();
    total += CountPositions(*rem);
    for (auto& x : *rem) all.push_back(x);
  }
  // Remaining: [10,30) [35,37) [38,60) = 20 + 2 + 22 = 44 positions.
  EXPECT_EQ(total, 44u);
  EXPECT_EQ(Normalize(all), (Ranges{{10, 30}, {35, 37}, {38, 60}}));
}

TEST(CheckpointTest, NamesWhatIsInconsistent) {
  auto missing = RemainingFor({Make(0, 3, 90, {})}, 0, 2);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("all 3 ranks"), std::string::npos) << missing.status().ToString();
  auto a = Make(0, 2, 90, {});
  auto b = Make(1, 2, 90, {});
  b.epoch = 3;
  auto epochs = RemainingFor({a, b}, 0, 1);
  ASSERT_FALSE(epochs.ok());
  EXPECT_NE(epochs.status().message().find("different epochs"), std::string::npos);
  b = Make(0, 2, 90, {});
  auto dup = RemainingFor({a, b}, 0, 1);
  ASSERT_FALSE(dup.ok());
}

}  // namespace
}  // namespace cqlstream::loader
