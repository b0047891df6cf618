// Copyright (c) cqlstream authors.
#include "store/key_scan_order.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cql/test_util.h"
#include "cql/wire.h"

namespace cqlstream::store {
namespace {

std::vector<uint8_t> Token(int64_t t) {
  std::vector<uint8_t> b(8);
  cql::StoreU64(b.data(), static_cast<uint64_t>(t));
  return b;
}
std::vector<uint8_t> Key(const std::string& s) { return {s.begin(), s.end()}; }

TEST(KeyScanOrderTest, TakesRowsOfItsRangeInRingOrder) {
  KeyScanOrder o(-100, 100, "ks.t");
  auto row = [&](int64_t t, const std::string& k) {
    const auto tb = Token(t), kb = Key(k);
    return o.Row(std::span<const uint8_t>(tb), std::span<const uint8_t>(kb));
  };
  EXPECT_TRUE(row(-99, "a").ok());
  EXPECT_TRUE(row(5, "b").ok());
  EXPECT_TRUE(row(5, "c").ok()) << "equal tokens: keys ascending by their bytes";
  EXPECT_TRUE(row(100, "a").ok()) << "the end is in the range";
  EXPECT_EQ(o.rows(), 4);
}

TEST(KeyScanOrderTest, RefusesRowsOfAnotherRangeRepeatsAndMalformedCells) {
  struct Case {
    int64_t token;
    std::string key;
    const char* says;
  };
  const std::vector<Case> cases = {
      {-100, "a", "outside the range"},  // the start is exclusive
      {101, "a", "outside the range"},
      {10, "k", "after one of token 10"},  // the previous row again (a repeated page)
      {9, "z", "after one of token 10"},
      {10, "j", "after one of token 10"},  // equal token, smaller key
  };
  for (const auto& c : cases) {
    KeyScanOrder o(-100, 100, "ks.t");
    const auto t0 = Token(10), k0 = Key("k");
    ASSERT_TRUE(o.Row(std::span<const uint8_t>(t0), std::span<const uint8_t>(k0)).ok());
    const auto tb = Token(c.token), kb = Key(c.key);
    const Status s = o.Row(std::span<const uint8_t>(tb), std::span<const uint8_t>(kb));
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << c.token << " " << c.key;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("ks.t over tokens (-100, 100]"), std::string::npos) << s.message();
  }
  KeyScanOrder o(-100, 100, "ks.t");
  const auto k = Key("a"), short_token = std::vector<uint8_t>{1, 2, 3, 4};
  EXPECT_EQ(o.Row(std::nullopt, std::span<const uint8_t>(k)).code(), Status::Code::kCorruption);
  EXPECT_EQ(o.Row(std::span<const uint8_t>(short_token), std::span<const uint8_t>(k)).code(),
            Status::Code::kCorruption);
  const auto t = Token(1);
  EXPECT_EQ(o.Row(std::span<const uint8_t>(t), std::nullopt).code(), Status::Code::kCorruption);
  EXPECT_EQ(o.rows(), 0);
}

TEST(KeyScanOrderTest, ChecksPagesAcrossEachOther) {
  cql::testing::RowsSpec spec;
  spec.columns = {{"system.token(id)", DataType::Simple(TypeId::kBigint)}, {"id", DataType::Simple(TypeId::kInt)}};
  spec.rows = {{Value::Bigint(1), Value::Int(7)}, {Value::Bigint(2), Value::Int(8)}};
  KeyScanOrder o(0, 10, "ks.t");
  ASSERT_TRUE(o.Page(cql::testing::MakeRows(spec)).ok());
  // The same page again (a server that answered it twice): refused.
  EXPECT_EQ(o.Page(cql::testing::MakeRows(spec)).code(), Status::Code::kCorruption);
  cql::testing::RowsSpec narrow;
  narrow.columns = {{"id", DataType::Simple(TypeId::kInt)}};
  narrow.rows = {{Value::Int(7)}};
  EXPECT_EQ(KeyScanOrder(0, 10, "ks.t").Page(cql::testing::MakeRows(narrow)).code(), Status::Code::kCorruption);
}

}  // namespace
}  // namespace cqlstream::store
