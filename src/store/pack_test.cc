// Copyright (c) cqlstream authors.
#include "store/pack.h"

#include <gtest/gtest.h>

#include <set>

namespace cqlstream::store {
namespace {

TEST(PackMembershipTest, EverySampleIsInOnePackOrALeftover) {
  for (int64_t count : {0, 1, 63, 64, 65, 900, 1000}) {
    for (int32_t p : {2, 7, 64}) {
      SCOPED_TRACE(::testing::Message() << "count " << count << " P " << p);
      PackMembership m(count, p, 12345, 3);
      EXPECT_EQ(m.packs(), count / p);
      EXPECT_EQ(m.leftovers(), count % p);
      std::set<int32_t> seen;
      for (int64_t j = 0; j < m.packs(); ++j) {
        for (int32_t k = 0; k < p; ++k) EXPECT_TRUE(seen.insert(m.Member(j, k)).second);
      }
      for (int64_t t = 0; t < m.leftovers(); ++t) EXPECT_TRUE(seen.insert(m.Leftover(t)).second);
      ASSERT_EQ(static_cast<int64_t>(seen.size()), count);
      if (count > 0) {
        EXPECT_EQ(*seen.begin(), 0);
        EXPECT_EQ(*seen.rbegin(), count - 1);
      }
    }
  }
}

TEST(PackMembershipTest, APackIsNotARunOfTheListing) {
  // Ingest numbers samples in path order (class folders): a pack must
  // hold samples from all over the segment, not idx j*P .. j*P+P-1.
  PackMembership m(6400, 64, 1, 0);
  int runs = 0;
  for (int64_t j = 0; j < m.packs(); ++j) {
    std::set<int32_t> tenths;
    for (int32_t k = 0; k < 64; ++k) tenths.insert(m.Member(j, k) / 640);
    EXPECT_GE(tenths.size(), 5u) << "pack " << j;
    runs += tenths.size() == 1;
  }
  EXPECT_EQ(runs, 0);
  // The seed and the segment key the membership.
  EXPECT_NE(PackMembership(6400, 64, 2, 0).Member(0, 0) * 6400 + PackMembership(6400, 64, 2, 0).Member(0, 1),
            m.Member(0, 0) * 6400 + m.Member(0, 1));
  EXPECT_NE(PackMembership(6400, 64, 1, 1).Member(0, 0) * 6400 + PackMembership(6400, 64, 1, 1).Member(0, 1),
            m.Member(0, 0) * 6400 + m.Member(0, 1));
}

TEST(PackSizeForTest, OneRowSmallSamplesOnlyAndAtMostHalfAMebibytePerPack) {
  EXPECT_EQ(PackSizeFor(540, 1 << 20, 64), 64);
  EXPECT_EQ(PackSizeFor(16 << 10, 1 << 20, 64), 32);   // 512 KiB / 16 KiB
  EXPECT_EQ(PackSizeFor((16 << 10) + 1, 1 << 20, 64), 0);  // too large
  EXPECT_EQ(PackSizeFor(5000, 4096, 64), 0);           // two rows
  EXPECT_EQ(PackSizeFor(0, 4096, 64), 0);              // unknown
  EXPECT_EQ(PackSizeFor(-1, 4096, 64), 0);
  EXPECT_EQ(PackSizeFor(100, 0, 64), 0);
  EXPECT_EQ(PackSizeFor(100, 4096, 1000), kMaxPackSize);
  EXPECT_EQ(PackSizeFor(100, 4096, 1), 0);
}

TEST(ValidatePackTest, NamesWhatALyingPacksRowGetsWrong) {
  DatasetInfo d;
  d.name = "fm";
  d.chunk_size = 1 << 20;
  SegmentInfo g;
  g.seg = 2;
  g.count = 1000;
  g.max_size = 600;
  PackInfo ok{2, 1000, 64, 7, 960, 0};
  EXPECT_TRUE(ValidatePack(ok, &g, d).ok());
  PackInfo left = ok;
  left.packed = 958;
  left.left_out = 2;
  EXPECT_TRUE(ValidatePack(left, &g, d).ok());

  auto refused = [&](PackInfo p, const SegmentInfo* seg, const std::string& what) {
    Status st = ValidatePack(p, seg, d);
    EXPECT_EQ(st.code(), Status::Code::kCorruption) << what;
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  };
  refused(ok, nullptr, "no such segment");
  PackInfo p = ok;
  p.pack_size = 0;
  refused(p, &g, "pack size 0 is outside");
  p.pack_size = 101;
  refused(p, &g, "pack size 101 is outside");
  p = ok;
  p.count = 999;
  refused(p, &g, "packed for 999 samples, but the segment holds 1000");
  p = ok;
  p.packed = 961;
  refused(p, &g, "do not add up");
  p = ok;
  p.left_out = -1;
  p.packed = 961;
  refused(p, &g, "do not add up");
  SegmentInfo big = g;
  big.max_size = 12000;  // 512 KiB / 12000 = 43 per pack
  refused(ok, &big, "does not fit samples of up to 12000 bytes");
}

}  // namespace
}  // namespace cqlstream::store
