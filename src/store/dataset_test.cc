// Copyright (c) cqlstream authors.
//
// Tests of include/cqlstream/dataset.h as implemented in dataset.cc: sample
// keys, identifier rules (selection files: selection_file_test.cc).
#include "cqlstream/dataset.h"

#include <gtest/gtest.h>

namespace cqlstream {
namespace {

TEST(DatasetTest, KeysPackSegmentAndIndex) {
  const SampleKey k = MakeKey(3, 1025);
  EXPECT_EQ(KeySegment(k), 3);
  EXPECT_EQ(KeyIndex(k), 1025);
  EXPECT_EQ(k, (uint64_t{3} << 32) | 1025);
  EXPECT_EQ(FormatKey(k), "3:1025");
  EXPECT_LT(MakeKey(0, 2000000000), MakeKey(1, 0));
}

TEST(DatasetTest, IdentifierRules) {
  EXPECT_TRUE(ValidateDatasetName("fashion_mnist").ok());
  EXPECT_TRUE(ValidateDatasetName(std::string(24, 'a')).ok());
  EXPECT_FALSE(ValidateDatasetName(std::string(25, 'a')).ok());
  for (const char* bad : {"", "1abc", "_x", "Abc", "a-b", "a b", "a;drop", "é"}) {
    auto st = ValidateDatasetName(bad);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  }
  EXPECT_TRUE(ValidateKeyspaceName(std::string(32, 'k')).ok());
  EXPECT_FALSE(ValidateKeyspaceName(std::string(33, 'k')).ok());
  EXPECT_NE(ValidateKeyspaceName("X").message().find("lowercase"), std::string::npos);
}

}  // namespace
}  // namespace cqlstream
