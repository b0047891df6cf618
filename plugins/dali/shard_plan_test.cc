// Copyright (c) cqlstream authors.
#include "shard_plan.h"

#include <gtest/gtest.h>

#include "loader/plan.h"

namespace cqlstream::dali_plugin {
namespace {

// DALI's iterator: np.floor(i * n / s) (base_iterator._calculate_shard_sizes).
uint64_t Oracle(uint64_t n, int i, int s) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(i) * n) / static_cast<unsigned>(s));
}

TEST(ShardPlan, LoaderRankIsDaliShard) {
  for (uint64_t n : {0ull, 1ull, 7ull, 10ull, 60000ull, 1ull << 40, (1ull << 62) + 12345}) {
    for (int s : {1, 2, 3, 7, 64, 1000}) {
      uint64_t total = 0;
      for (int i = 0; i < s; ++i) {
        const loader::PositionRange r = loader::RankSlice(n, i, s);
        EXPECT_EQ(r.begin, Oracle(n, i, s)) << n << " " << i << "/" << s;
        EXPECT_EQ(r.end, Oracle(n, i + 1, s)) << n << " " << i << "/" << s;
        // The padded size covers every shard.
        EXPECT_LE(r.size(), PaddedShardSize(n, s));
        total += r.size();
      }
      EXPECT_EQ(total, n);
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

TEST(ShardPlan, ExampleTenSamplesThreeShards) {
  // DALI: shards of 3, 3, 4; so are the loader's ranks.
  EXPECT_EQ(loader::RankSlice(10, 0, 3).size(), 3u);
  EXPECT_EQ(loader::RankSlice(10, 1, 3).size(), 3u);
  EXPECT_EQ(loader::RankSlice(10, 2, 3).size(), 4u);
}

}  // namespace
}  // namespace cqlstream::dali_plugin
