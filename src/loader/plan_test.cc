// Copyright (c) cqlstream authors.
#include "loader/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <unordered_set>

namespace cqlstream::loader {
namespace {

TEST(PermutationTest, IsABijectionForManySizes) {
  for (uint64_t n : {1ull, 2ull, 3ull, 7ull, 64ull, 1000ull, 4097ull, 12345ull}) {
    Permutation p(n, 42, 0, true);
    std::vector<uint8_t> seen(n, 0);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t v = p(i);
      ASSERT_LT(v, n);
      ASSERT_EQ(seen[v], 0) << "n=" << n << " value " << v << " twice";
      seen[v] = 1;
    }
  }
}

TEST(PermutationTest, DependsOnSeedAndEpochOnlyAndShuffles) {
  const uint64_t n = 10000;
  auto order = [&](uint64_t seed, uint64_t epoch) {
    Permutation p(n, seed, epoch, true);
    std::vector<uint64_t> v(n);
    for (uint64_t i = 0; i < n; ++i) v[i] = p(i);
    return v;
  };
  EXPECT_EQ(order(1, 0), order(1, 0));
  EXPECT_NE(order(1, 0), order(1, 1));
  EXPECT_NE(order(1, 0), order(2, 0));
  // Not the identity, and not nearly sorted.
  auto v = order(1, 0);
  int in_place = 0;
  for (uint64_t i = 0; i < n; ++i) in_place += v[i] == i;
  EXPECT_LT(in_place, 20);
  Permutation id(n, 1, 0, false);
  for (uint64_t i = 0; i < n; i += 97) EXPECT_EQ(id(i), i);
}

TEST(PermutationTest, ABillionSamplesNeedNoMemory) {
  const uint64_t n = 1'000'000'000ull;
  Permutation p(n, 7, 3, true);
  // The whole plan is a few words, whatever n is.
  EXPECT_LE(sizeof(p), 64u);
  RankPlan plan({RankSlice(n, 5, 8)});
  EXPECT_EQ(plan.size(), n / 8);
  // Two million positions of rank 5: all in range and distinct.
  std::unordered_set<uint64_t> seen;
  seen.reserve(2'000'000);
  for (uint64_t i = 0; i < 2'000'000; ++i) {
    const uint64_t v = p(plan.PositionAt(i));
    ASSERT_LT(v, n);
    ASSERT_TRUE(seen.insert(v).second);
  }
}

TEST(RankSliceTest, SlicesAreDisjointAndCoverEverything) {
  for (uint64_t n : {0ull, 1ull, 5ull, 100ull, 101ull, 1023ull}) {
    for (int w = 1; w <= 9; ++w) {
      uint64_t next = 0;
      uint64_t lo = UINT64_MAX, hi = 0;
      for (int r = 0; r < w; ++r) {
        auto s = RankSlice(n, r, w);
        EXPECT_EQ(s.begin, next);
        next = s.end;
        lo = std::min(lo, s.size());
        hi = std::max(hi, s.size());
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(hi - lo, 1u);
    }
  }
}

TEST(SplitRangesTest, ResplitsRemainingPositions) {
  std::vector<PositionRange> rem = {{0, 3}, {10, 12}, {20, 25}};  // 10 positions
  std::vector<uint64_t> all;
  for (int r = 0; r < 3; ++r) {
    auto part = SplitRanges(rem, r, 3);
    for (auto& x : part) {
      for (uint64_t p = x.begin; p < x.end; ++p) all.push_back(p);
    }
  }
  std::vector<uint64_t> want = {0, 1, 2, 10, 11, 20, 21, 22, 23, 24};
  EXPECT_EQ(all, want);
  // 10 positions over 3 ranks: 3, 3, 4 (floor(r * 10 / 3)).
  EXPECT_EQ(SplitRanges(rem, 0, 3), (std::vector<PositionRange>{{0, 3}}));
  EXPECT_EQ(SplitRanges(rem, 1, 3), (std::vector<PositionRange>{{10, 12}, {20, 21}}));
  EXPECT_EQ(SplitRanges(rem, 2, 3), (std::vector<PositionRange>{{21, 25}}));
}

// DALI's iterators: np.floor(i * n / s) (base_iterator._calculate_shard_sizes).
uint64_t DaliOracle(uint64_t n, int i, int s) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(i) * n) / static_cast<unsigned>(s));
}

TEST(RankSliceTest, IsDalisShardCut) {
  for (uint64_t n : {0ull, 1ull, 7ull, 10ull, 60000ull, 1ull << 40, (1ull << 62) + 12345, ~0ull}) {
    for (int s : {1, 2, 3, 7, 64, 1000, 1 << 30}) {
      for (int i : {0, 1, s / 2, s - 1}) {
        if (i < 0 || i >= s) continue;
        EXPECT_EQ(ShardBegin(n, i, s), DaliOracle(n, i, s)) << n << " " << i << "/" << s;
        EXPECT_EQ(RankSlice(n, i, s), (PositionRange{DaliOracle(n, i, s), DaliOracle(n, i + 1, s)}));
      }
      EXPECT_EQ(ShardBegin(n, s, s), n);
    }
  }
  // 10 samples over 3 ranks: 3, 3, 4 (the larger slices last).
  EXPECT_EQ(RankSlice(10, 0, 3), (PositionRange{0, 3}));
  EXPECT_EQ(RankSlice(10, 1, 3), (PositionRange{3, 6}));
  EXPECT_EQ(RankSlice(10, 2, 3), (PositionRange{6, 10}));
}

TEST(SampleSourceTest, MapsOrdinalsToSegmentKeys) {
  std::vector<SegmentInfo> segs(3);
  segs[0].seg = 0;
  segs[0].count = 3;
  segs[1].seg = 4;
  segs[1].count = 0;  // empty segments take no ordinals
  segs[2].seg = 7;
  segs[2].count = 2;
  auto s = SampleSource::FromSegments(segs);
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s.KeyAt(0), MakeKey(0, 0));
  EXPECT_EQ(s.KeyAt(2), MakeKey(0, 2));
  EXPECT_EQ(s.KeyAt(3), MakeKey(7, 0));
  EXPECT_EQ(s.KeyAt(4), MakeKey(7, 1));
  segs[2].count = 3;
  EXPECT_NE(SampleSource::FromSegments(segs).Fingerprint(), s.Fingerprint());
  auto k = SampleSource::FromKeys({MakeKey(1, 5), MakeKey(2, 0)});
  EXPECT_EQ(k.KeyAt(1), MakeKey(2, 0));
}

TEST(RankPlanTest, ConcatenatesRanges) {
  RankPlan p({{5, 7}, {100, 101}, {8, 10}});
  ASSERT_EQ(p.size(), 5u);
  std::vector<uint64_t> got;
  for (uint64_t i = 0; i < p.size(); ++i) got.push_back(p.PositionAt(i));
  EXPECT_EQ(got, (std::vector<uint64_t>{5, 6, 100, 8, 9}));
}

}  // namespace
}  // namespace cqlstream::loader
