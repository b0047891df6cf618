// Copyright (c) cqlstream authors.
#include "store/stats.h"

#include <gtest/gtest.h>

namespace cqlstream::store {
namespace {

TEST(StatsTest, MergeAndSummarize) {
  const auto h = MergeHistograms({{0, 0, 1}, {0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 96, 2}});
  ASSERT_EQ(h.size(), 12u);
  EXPECT_EQ(h[2], 2);
  EXPECT_EQ(h[10], 96);
  const SizeSummary s = SummarizeSizes(h, 3000);
  EXPECT_EQ(s.count, 100);
  EXPECT_EQ(s.min_at_least, 4);
  EXPECT_GE(s.median, 1024);
  EXPECT_LT(s.median, 2048);
  EXPECT_GE(s.p99, 2048);
  EXPECT_LE(s.p99, 3000);
  EXPECT_EQ(s.max, 3000);
}

TEST(StatsTest, QuantilesStayInsideTheirBucket) {
  std::vector<int64_t> h(20, 0);
  h[10] = 10;  // sizes in [1024, 2048)
  EXPECT_EQ(HistogramQuantile(h, 1500, 0.0), 1024);
  EXPECT_EQ(HistogramQuantile(h, 1500, 1.0), 1500);  // clamped to the largest size
  const int64_t m = HistogramQuantile(h, 1500, 0.5);
  EXPECT_GT(m, 1024);
  EXPECT_LT(m, 1500);
  EXPECT_EQ(HistogramQuantile({}, 0, 0.5), 0);
  EXPECT_EQ(SummarizeSizes({}, 0).count, 0);
}

TEST(StatsTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(27), "27 B");
  EXPECT_EQ(HumanBytes(820e3), "820.0 kB");
  EXPECT_EQ(HumanBytes(1.5e6), "1.5 MB");
  EXPECT_EQ(HumanBytes(2.25e9), "2.25 GB");
}

}  // namespace
}  // namespace cqlstream::store
