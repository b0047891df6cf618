// Copyright (c) cqlstream authors.
#include "loader/packed_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

namespace cqlstream::loader {
namespace {

// Segments (count, packed?) with pack size P.
std::shared_ptr<const PackedLayout> Layout(const std::vector<std::pair<int64_t, bool>>& segs, int32_t p) {
  std::vector<PackedLayout::Segment> out;
  int32_t seg = 0;
  for (auto [count, packed] : segs) {
    PackedLayout::Segment g;
    g.seg = seg;
    g.count = count;
    if (packed) g.packs.emplace(count, p, 99, seg);
    out.push_back(std::move(g));
    seg += 2;
  }
  return std::make_shared<PackedLayout>(std::move(out), p);
}

TEST(PackedOrderTest, IsABijectionOverManyShapes) {
  const std::vector<std::vector<std::pair<int64_t, bool>>> shapes = {
      {{640, true}},                            // whole packs only
      {{650, true}},                            // 10 leftovers
      {{100, true}, {37, false}, {300, true}},  // a segment not packed between packed ones
      {{5, false}, {3, false}},                 // nothing packed: singletons only
      {{1, true}},                              // fewer samples than a pack
      {{129, true}, {64, true}, {1, true}},
  };
  for (size_t s = 0; s < shapes.size(); ++s) {
    for (bool shuffle : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "shape " << s << (shuffle ? " shuffled" : " in order"));
      auto layout = Layout(shapes[s], 64);
      uint64_t n = 0;
      for (auto [count, packed] : shapes[s]) n += static_cast<uint64_t>(count);
      ASSERT_EQ(layout->size(), n);
      EXPECT_EQ(layout->packs() * 64 + layout->singletons(), n);
      for (uint64_t epoch : {0u, 1u}) {
        PackedOrder order(layout, 7, epoch, shuffle);
        std::set<uint64_t> seen;
        for (uint64_t i = 0; i < n; ++i) {
          const auto x = order.At(i);
          ASSERT_LT(x.ordinal, n);
          EXPECT_TRUE(seen.insert(x.ordinal).second) << "position " << i;
        }
        EXPECT_EQ(seen.size(), n);
      }
    }
  }
}

TEST(PackedOrderTest, APacksMembersTakeConsecutivePositionsAndSingletonsLieBetweenPacks) {
  // 3 segments: 10 packs of 64 + 5 leftovers, 20 samples not packed, 2 packs.
  auto layout = Layout({{645, true}, {20, false}, {128, true}}, 64);
  EXPECT_EQ(layout->packs(), 12u);
  EXPECT_EQ(layout->singletons(), 25u);
  PackedOrder order(layout, 3, 5, true);
  std::map<std::pair<int32_t, int32_t>, std::vector<uint64_t>> positions;  // (seg, pack) -> positions
  std::vector<uint64_t> singles;
  for (uint64_t i = 0; i < layout->size(); ++i) {
    const auto x = order.At(i);
    if (x.pack < 0) {
      singles.push_back(i);
    } else {
      positions[{x.seg, x.pack}].push_back(i);
    }
  }
  EXPECT_EQ(positions.size(), 12u);
  std::vector<uint64_t> starts;
  for (const auto& [pack, pos] : positions) {
    ASSERT_EQ(pos.size(), 64u);
    EXPECT_EQ(pos.back() - pos.front(), 63u) << pack.first << ":" << pack.second;  // consecutive
    EXPECT_TRUE(order.At(pos.back()).last);
    EXPECT_FALSE(order.At(pos.front()).last);
    starts.push_back(pos.front());
  }
  std::sort(starts.begin(), starts.end());
  ASSERT_EQ(singles.size(), 25u);
  // Gap k after block k's pack holds floor((k+1)*25/12) - floor(k*25/12)
  // singletons: 2 or 3, evenly spread.
  for (size_t k = 0; k < starts.size(); ++k) {
    const uint64_t gap = (k + 1 < starts.size() ? starts[k + 1] : layout->size()) - starts[k] - 64;
    EXPECT_EQ(gap, (k + 1) * 25 / 12 - k * 25 / 12) << "gap " << k;
  }
  EXPECT_EQ(starts.front(), 0u);
}

TEST(PackedOrderTest, EachEpochReadsThePacksAndTheirMembersInAFreshOrder) {
  auto layout = Layout({{6400, true}}, 64);
  PackedOrder e0(layout, 1, 0, true), e1(layout, 1, 1, true), again(layout, 1, 0, true), other(layout, 2, 0, true);
  int same_pack = 0, same_sample = 0, differ_seed = 0;
  for (uint64_t i = 0; i < layout->size(); ++i) {
    EXPECT_EQ(e0.At(i).ordinal, again.At(i).ordinal);  // (seed, epoch) decide
    same_pack += e0.At(i).pack == e1.At(i).pack;
    same_sample += e0.At(i).ordinal == e1.At(i).ordinal;
    differ_seed += e0.At(i).ordinal != other.At(i).ordinal;
  }
  EXPECT_LT(same_pack, 640);  // about 1 in 100 by chance
  EXPECT_LT(same_sample, 64);
  EXPECT_GT(differ_seed, 6000);
  // Within one pack's 64 positions, the members come in another order in
  // another epoch (both epochs read pack 0 somewhere).
  auto members_of_pack0 = [&](const PackedOrder& o) {
    std::vector<uint64_t> m;
    for (uint64_t i = 0; i < layout->size(); ++i) {
      if (o.At(i).pack == 0) m.push_back(o.At(i).ordinal);
    }
    return m;
  };
  const auto a = members_of_pack0(e0), b = members_of_pack0(e1);
  EXPECT_EQ(std::set<uint64_t>(a.begin(), a.end()), std::set<uint64_t>(b.begin(), b.end()));
  EXPECT_NE(a, b);
}

TEST(PackedOrderTest, TheFingerprintNamesTheLayout) {
  const auto a = Layout({{650, true}}, 64)->Fingerprint();
  EXPECT_EQ(a, Layout({{650, true}}, 64)->Fingerprint());
  EXPECT_NE(a, Layout({{650, true}}, 32)->Fingerprint());
  EXPECT_NE(a, Layout({{650, false}}, 64)->Fingerprint());
  EXPECT_NE(a, Layout({{651, true}}, 64)->Fingerprint());
  std::vector<PackedLayout::Segment> other_seed(1);
  other_seed[0].count = 650;
  other_seed[0].packs.emplace(650, 64, 100, 0);
  EXPECT_NE(a, PackedLayout(std::move(other_seed), 64).Fingerprint());
}

}  // namespace
}  // namespace cqlstream::loader
