// Copyright (c) cqlstream authors.
//
// Checkpoints taken before loader::RankSlice moved to DALI's cut (the
// N mod W larger slices then went to the first ranks) still resume exactly
// once: a state carries its rank's position ranges explicitly, so nothing in
// RemainingFor depends on how the earlier run cut the epoch.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "loader/checkpoint.h"
#include "loader/plan.h"

namespace cqlstream::loader {
namespace {

// The earlier cut: the first n % w ranks get one sample more.
PositionRange EarlierSlice(uint64_t n, int rank, int world) {
  const uint64_t w = static_cast<uint64_t>(world), r = static_cast<uint64_t>(rank);
  const uint64_t base = n / w, extra = n % w;
  const uint64_t begin = r * base + std::min(r, extra);
  return {begin, begin + base + (r < extra ? 1 : 0)};
}

Checkpoint Earlier(int rank, int world, uint64_t n, uint64_t delivered) {
  Checkpoint c;
  c.fingerprint = 7;
  c.seed = 3;
  c.n = n;
  c.epoch = 1;
  c.world = world;
  c.rank = rank;
  c.batch_size = 2;
  c.assigned = {EarlierSlice(n, rank, world)};
  c.done = {{c.assigned[0].begin, c.assigned[0].begin + delivered}};
  // Through the bytes, as a state saved by an earlier run would come.
  return *Checkpoint::Decode(c.Encode());
}

TEST(CheckpointCompatTest, EarlierCutStatesResumeExactlyOnce) {
  const uint64_t n = 10;  // earlier cut over 3 ranks: 4, 3, 3; DALI's: 3, 3, 4
  ASSERT_NE(EarlierSlice(n, 0, 3), RankSlice(n, 0, 3));
  std::vector<Checkpoint> cps = {Earlier(0, 3, n, 2), Earlier(1, 3, n, 1), Earlier(2, 3, n, 0)};
  // Same world: each rank its own remainder, in the earlier cut.
  auto own = RemainingFor({cps[0]}, 0, 3);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_EQ(*own, (Ranges{{2, 4}}));
  // Another world size from all states: the rest, re-split, once.
  for (int world : {1, 2, 3, 4}) {
    std::multiset<uint64_t> seen;
    for (int r = 0; r < world; ++r) {
      auto rem = RemainingFor(cps, r, world);
      ASSERT_TRUE(rem.ok()) << rem.status().ToString();
      for (const auto& x : *rem) {
        for (uint64_t p = x.begin; p < x.end; ++p) seen.insert(p);
      }
    }
    EXPECT_EQ(seen, (std::multiset<uint64_t>{2, 3, 5, 6, 7, 8, 9})) << "world " << world;
  }
}

}  // namespace
}  // namespace cqlstream::loader
