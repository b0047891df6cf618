// Copyright (c) cqlstream authors.
#include "shard_plan.h"

#include <gtest/gtest.h>

#include <set>

#include "loader/plan.h"

namespace cqlstream::dali_plugin {
namespace {

// DALI's iterator: np.floor(i * n / s) (base_iterator._calculate_shard_sizes).
uint64_t Oracle(uint64_t n, int i, int s) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(i) * n) / static_cast<unsigned>(s));
}

TEST(ShardPlan, BeginMatchesDaliFormula) {
  for (uint64_t n : {0ull, 1ull, 7ull, 10ull, 60000ull, 1ull << 40, (1ull << 62) + 12345}) {
    for (int s : {1, 2, 3, 7, 64, 1000}) {
      for (int i = 0; i <= s; ++i) EXPECT_EQ(DaliShardBegin(n, i, s), Oracle(n, i, s)) << n << " " << i << "/" << s;
    }
  }
}

TEST(ShardPlan, PaddedSizeAndBatches) {
  EXPECT_EQ(PaddedShardSize(10, 3), 4u);
  EXPECT_EQ(PaddedShardSize(9, 3), 3u);
  EXPECT_EQ(BatchesPerEpoch(10, 3, 4), 1u);
  EXPECT_EQ(BatchesPerEpoch(10, 3, 3), 2u);
  EXPECT_EQ(BatchesPerEpoch(60000, 1, 256), 235u);
  EXPECT_EQ(BatchesPerEpoch(60000, 2, 256), 118u);
}

TEST(ShardPlan, RankMappingIsAPermutationWithDaliSizes) {
  for (uint64_t n : {3ull, 10ull, 11ull, 97ull, 1000ull, 1001ull}) {
    for (int s = 1; s <= 12 && static_cast<uint64_t>(s) <= n; ++s) {
      std::set<int> ranks;
      uint64_t total = 0;
      for (int i = 0; i < s; ++i) {
        const int r = LoaderRankForShard(n, i, s);
        ASSERT_GE(r, 0);
        ASSERT_LT(r, s);
        ranks.insert(r);
        // The loader's slice for that rank has the size DALI expects for shard i.
        EXPECT_EQ(loader::RankSlice(n, r, s).size(), DaliShardSize(n, i, s)) << n << " " << i << "/" << s;
        total += DaliShardSize(n, i, s);
      }
      EXPECT_EQ(ranks.size(), static_cast<size_t>(s));
      EXPECT_EQ(total, n);
    }
  }
}

TEST(ShardPlan, ExampleTenSamplesThreeShards) {
  // DALI: shards of 3, 3, 4; cqlstream ranks: 4, 3, 3.
  EXPECT_EQ(LoaderRankForShard(10, 0, 3), 1);
  EXPECT_EQ(LoaderRankForShard(10, 1, 3), 2);
  EXPECT_EQ(LoaderRankForShard(10, 2, 3), 0);
  EXPECT_EQ(LoaderRankForShard(9, 1, 3), 1);  // even split: identity
}

}  // namespace
}  // namespace cqlstream::dali_plugin
