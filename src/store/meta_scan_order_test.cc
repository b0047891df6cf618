// Copyright (c) cqlstream authors.
#include "store/meta_scan_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <tuple>
#include <vector>

#include "cql/wire.h"
#include "net/routing/murmur3.h"
#include "store/scan.h"

namespace cqlstream::store {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();

int64_t TokenOf(int32_t seg, int32_t block) {
  std::array<uint8_t, 4> s{}, b{};
  cql::StoreU32(s.data(), static_cast<uint32_t>(seg));
  cql::StoreU32(b.data(), static_cast<uint32_t>(block));
  return routing::PartitionKeyToken({std::span<const uint8_t>(s), std::span<const uint8_t>(b)}).value();
}

struct Partition {
  int64_t token;
  int32_t seg, block;
};

// Partitions (seg 0-3, blocks 0-2) in ring order, as a server sends them.
std::vector<Partition> InRingOrder() {
  std::vector<Partition> out;
  for (int32_t seg = 0; seg < 4; ++seg) {
    for (int32_t block = 0; block < 3; ++block) out.push_back({TokenOf(seg, block), seg, block});
  }
  std::sort(out.begin(), out.end(), [](const Partition& a, const Partition& b) {
    return std::tie(a.token, a.seg, a.block) < std::tie(b.token, b.seg, b.block);
  });
  return out;
}

int32_t FirstIdx(int32_t block) { return block << kBlockShift; }

TEST(MetaScanOrderTest, TakesAWholeRingInOrder) {
  MetaScanOrder o(kMin, kMax, "ks.m_x");
  int64_t rows = 0;
  for (const Partition& p : InRingOrder()) {
    for (int32_t i : {0, 1, 7, (1 << kBlockShift) - 1}) {
      ASSERT_TRUE(o.Row(p.seg, p.block, FirstIdx(p.block) + i).ok()) << p.seg << "/" << p.block << "/" << i;
      ++rows;
    }
  }
  EXPECT_EQ(o.rows(), rows);
}

TEST(MetaScanOrderTest, RefusesRepeatsRowsOfOtherRangesAndIdxOutsideTheBlock) {
  const std::vector<Partition> ring = InRingOrder();
  const Partition a = ring[3], b = ring[4];
  auto started = [&] {
    MetaScanOrder o(kMin, kMax, "ks.m_x");
    EXPECT_TRUE(o.Row(a.seg, a.block, FirstIdx(a.block) + 5).ok());
    EXPECT_TRUE(o.Row(b.seg, b.block, FirstIdx(b.block)).ok());
    EXPECT_TRUE(o.Row(b.seg, b.block, FirstIdx(b.block) + 2).ok());
    return o;
  };
  struct Case {
    int32_t seg, block, idx;
    const char* words;
  };
  for (const Case& c : {Case{b.seg, b.block, FirstIdx(b.block) + 2, "after idx"},      // a row twice
                        Case{b.seg, b.block, FirstIdx(b.block) + 1, "after idx"},      // back within a partition
                        Case{a.seg, a.block, FirstIdx(a.block) + 6, "a repeated or foreign page"},  // back a partition
                        Case{b.seg, b.block, FirstIdx(b.block + 1), "not an idx of that block"},
                        Case{b.seg, b.block, -1, "not an idx of that block"}}) {
    MetaScanOrder o = started();
    Status st = o.Row(c.seg, c.block, c.idx);
    EXPECT_EQ(st.code(), Status::Code::kCorruption) << c.seg << "/" << c.block << "/" << c.idx;
    EXPECT_NE(st.ToString().find(c.words), std::string::npos) << st.ToString();
    EXPECT_NE(st.ToString().find("the metadata scan of ks.m_x"), std::string::npos) << st.ToString();
    EXPECT_EQ(o.rows(), 3);
  }

  // A range that ends before b's token: b's rows are another range's.
  MetaScanOrder half(kMin, a.token, "ks.m_x");
  EXPECT_TRUE(half.Row(a.seg, a.block, FirstIdx(a.block)).ok());
  Status st = half.Row(b.seg, b.block, FirstIdx(b.block));
  EXPECT_EQ(st.code(), Status::Code::kCorruption);
  EXPECT_NE(st.ToString().find("outside the range"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace cqlstream::store
