// Copyright (c) cqlstream authors.
#include "store/attached_retired.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cqlstream::store {
namespace {

std::span<const uint8_t> BytesOf(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(AttachedRetiredTest, RoundTripsAndRefusesWhatItDidNotWrite) {
  const std::vector<RetiredSegment> segs = {{3, 100}, {7, (int64_t{1} << 31) - 1}};
  const std::string row = EncodeRetired("train", segs);
  auto back = DecodeRetired("train", BytesOf(row));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, segs);
  EXPECT_TRUE(DecodeRetired("val", BytesOf(row)).status().IsNotFound()) << "another split's row";
  EXPECT_TRUE(DecodeRetired("train", BytesOf(EncodeRetired("train", {}))).value().empty());
  for (const std::string& bad : {std::string(), std::string("\x09tr", 3), row.substr(0, row.size() - 1),
                                 EncodeRetired("train", {{-2, 5}}), EncodeRetired("train", {{1, 0}}),
                                 EncodeRetired("train", {{1, int64_t{1} << 31}})}) {
    auto r = DecodeRetired("train", BytesOf(bad));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Status::Code::kCorruption) << r.status().ToString();
  }
  std::vector<RetiredSegment> many(kMaxRetiredSegments + 1, RetiredSegment{1, 1});
  EXPECT_FALSE(DecodeRetired("train", BytesOf(EncodeRetired("train", many))).ok());
  EXPECT_GE(RetiredIdx("train"), 0);
  EXPECT_NE(RetiredIdx("train"), RetiredIdx("val"));
}

}  // namespace
}  // namespace cqlstream::store
