// Copyright (c) cqlstream authors.
#include "store/catalog.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <optional>

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

}  // namespace
}  // namespace cqlstream::store
