// Copyright (c) cqlstream authors.
#include "store/verify.h"

#include <gtest/gtest.h>

namespace cqlstream::store {
namespace {

SampleData Good() {
  SampleData d;
  d.rows = 2;
  d.size = 10;
  d.image_size = 6;
  d.checksum = 0x1234;
  d.label = 3;
  d.data_bytes = 10;
  d.xxh64 = 0x1234;
  return d;
}

MetaRow Meta() {
  MetaRow m;
  m.size = 10;
  m.image_size = 6;
  m.checksum = 0x1234;
  m.label = 3;
  return m;
}

TEST(VerifyTest, AGoodSampleHasNoProblem) {
  const MetaRow m = Meta();
  EXPECT_EQ(CheckSample(Good(), &m), "");
}

TEST(VerifyTest, Problems) {
  const MetaRow m = Meta();
  SampleData d = Good();
  d.rows = 0;
  EXPECT_EQ(CheckSample(d, &m), "missing data");
  d = Good();
  d.data_bytes = 9;
  EXPECT_EQ(CheckSample(d, &m), "size mismatch: chunks hold 9 bytes, size says 10");
  d = Good();
  d.xxh64 = 0x99;
  EXPECT_NE(CheckSample(d, &m).find("checksum mismatch"), std::string::npos);
  d = Good();
  d.size.reset();
  EXPECT_NE(CheckSample(d, &m).find("incomplete"), std::string::npos);
  EXPECT_EQ(CheckSample(Good(), nullptr), "missing metadata row");
  MetaRow other = Meta();
  other.label = 4;
  other.labels = {1};
  EXPECT_EQ(CheckSample(Good(), &other), "metadata disagrees: label 4 vs 3, labels [1] vs []");
  d = Good();
  d.rows = 0;
  EXPECT_EQ(CheckSample(d, nullptr), "missing data; missing metadata row");
}

}  // namespace
}  // namespace cqlstream::store
