// Copyright (c) cqlstream authors.
#include "store/catalog.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <optional>
#include <tuple>

#include "store/source.h"

namespace cqlstream::store {
namespace {

// A partition's rows come in clustering order, each once: a segment at or
// below the one before is refused, and the one before stays recorded.
TEST(CatalogTest, SegmentsComeInOrderEachOnce) {
  std::optional<int32_t> last;
  EXPECT_TRUE(CheckNextSegment(3, &last, "d").ok());
  EXPECT_TRUE(CheckNextSegment(7, &last, "d").ok());
  EXPECT_EQ(last, 7);
  for (int32_t again : {7, 5}) {
    Status st = CheckNextSegment(again, &last, "d");
    EXPECT_EQ(st.code(), Status::Code::kCorruption) << again;
    EXPECT_NE(st.ToString().find(fmt::format("answered segment {} after segment 7", again)), std::string::npos)
        << st.ToString();
  }
  EXPECT_EQ(last, 7);
}

// A segment row's sizes must be possible: none below 0, and no sample
// larger than a stored sample may be (an attach records 0).
TEST(CatalogTest, SegmentSizesMustBePossible) {
  EXPECT_TRUE(CheckSegmentSizes(0, 0, 0, 0, "d").ok());
  EXPECT_TRUE(CheckSegmentSizes(0, 10, 5000, static_cast<int64_t>(kMaxPayloadBytes), "d").ok());
  for (auto [count, bytes, max_size] : {std::tuple<int64_t, int64_t, int64_t>{-1, 0, 0},
                                        {0, -1, 0},
                                        {0, 0, -1},
                                        {1, 1, static_cast<int64_t>(kMaxPayloadBytes) + 1},
                                        {1, int64_t{1} << 62, int64_t{1} << 62}}) {
    Status st = CheckSegmentSizes(4, count, bytes, max_size, "d");
    EXPECT_EQ(st.code(), Status::Code::kCorruption) << count << " " << bytes << " " << max_size;
    EXPECT_NE(st.ToString().find(fmt::format("segment 4 of dataset 'd' says count {}, bytes {} and max_size {}",
                                             count, bytes, max_size)),
              std::string::npos)
        << st.ToString();
  }
}

}  // namespace
}  // namespace cqlstream::store
