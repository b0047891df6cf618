// Copyright (c) cqlstream authors.
#include "net/routing/murmur3.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace cqlstream::routing {
namespace {

using namespace std::string_view_literals;

std::vector<uint8_t> Bytes(std::string_view s) { return {s.begin(), s.end()}; }

std::vector<uint8_t> Hex(std::string_view hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

std::vector<uint8_t> Repeat(std::string_view unit, int times) {
  std::vector<uint8_t> out;
  for (int i = 0; i < times; ++i) out.insert(out.end(), unit.begin(), unit.end());
  return out;
}

struct Vector {
  std::vector<uint8_t> key;
  int64_t token;
};

// apache/cassandra-gocql-driver, internal/murmur/murmur_test.go
// (TestMurmur3H1ForCassandra). Lengths 7..38: every tail length 0..15, with
// tail bytes >= 0x80 (negative as Java bytes) in the second series.
std::vector<Vector> GocqlVectors() {
  const std::string_view p2 =
      "prefix\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f\xc8\xc9"sv;
  auto with = [](std::string_view a, std::string_view b) {
    std::vector<uint8_t> v = Bytes(a);
    v.insert(v.end(), b.begin(), b.end());
    return v;
  };
  return {
      {Bytes("prefix\x00"sv), -5156414768376541762},
      {Bytes("prefix\x00\x01"sv), 3700033067394128583},
      {Bytes("prefix\x00\x01\x02"sv), -3973852022020331202},
      {Bytes("prefix\x00\x01\x02\x03"sv), 3038655072509758878},
      {Bytes("prefix\x00\x01\x02\x03\x04"sv), -5681686890369564299},
      {Bytes("prefix\x00\x01\x02\x03\x04\x05"sv), 8960422816272944721},
      {Bytes("prefix\x00\x01\x02\x03\x04\x05\x06"sv), -1104872167714568090},
      {Bytes("prefix\x00\x01\x02\x03\x04\x05\x06\x07"sv), -9199676315897541990},
      {Bytes("prefix\x00\x01\x02\x03\x04\x05\x06\x07\x08"sv), 4847624695450664884},
      {Bytes("prefix\x00\x01\x02\x03\x04\x05\x06\x07\x08\t"sv), -2737291859101550625},
      {Bytes("prefix\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n"sv), -1154133289533387924},
      {Bytes("prefix\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b"sv), 5781349077088505981},
      {Bytes("prefix\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c"sv), -681021187788781932},
      {Bytes("prefix\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r"sv), -3787130296809111096},
      {Bytes("prefix\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e"sv),
       -3115393326357146996},
      {Bytes("prefix\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f"sv),
       -2684252762052835206},
      {Bytes("prefix\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f\xc8"sv),
       -278181328349571586},
      {Bytes(p2), -5319761130493488577},
      {with(p2, "\xca"sv), -4593148434938707926},
      {with(p2, "\xca\xcb"sv), -575713103357290760},
      {with(p2, "\xca\xcb\xcc"sv), 4290743753678124926},
      {with(p2, "\xca\xcb\xcc\xcd"sv), 9164754117279683406},
      {with(p2, "\xca\xcb\xcc\xcd\xce"sv), -107668053986278786},
      {with(p2, "\xca\xcb\xcc\xcd\xce\xcf"sv), 64887291506465003},
      {with(p2, "\xca\xcb\xcc\xcd\xce\xcf\xd0"sv), 6241282934480161521},
      {with(p2, "\xca\xcb\xcc\xcd\xce\xcf\xd0\xd1"sv), 5150183507841894143},
      {with(p2, "\xca\xcb\xcc\xcd\xce\xcf\xd0\xd1\xd2"sv), 5645797256444299552},
      {with(p2, "\xca\xcb\xcc\xcd\xce\xcf\xd0\xd1\xd2\xd3"sv), -908235285856554578},
      {with(p2, "\xca\xcb\xcc\xcd\xce\xcf\xd0\xd1\xd2\xd3\xd4"sv), -1785405279637408062},
      {with(p2, "\xca\xcb\xcc\xcd\xce\xcf\xd0\xd1\xd2\xd3\xd4\xd5"sv), 5343233714768265848},
      {with(p2, "\xca\xcb\xcc\xcd\xce\xcf\xd0\xd1\xd2\xd3\xd4\xd5\xd6"sv), 4936964276934412722},
      {with(p2, "\xca\xcb\xcc\xcd\xce\xcf\xd0\xd1\xd2\xd3\xd4\xd5\xd6\xd7"sv), 2294903531026336836},
      {Hex("00104327529fb645dd00b883ec39ae448bb800000400066a6b00"), -9223371632693506265},
  };
}

// datastax/python-driver, tests/unit/test_metadata.py (TokensTest.test_murmur3_tokens).
std::vector<Vector> PythonDriverVectors() {
  return {
      {Bytes("123"), -7468325962851647638},
      {Repeat("\x00\xff\x10\xfa\x99"sv, 10), 5837342703291459765},  // 50 bytes, negative bytes
      {Repeat("\xfe"sv, 8), -8927430733708461935},                   // 8-byte negative tail
      {Repeat("\x10"sv, 8), 1446172840243228796},
      {Bytes("9223372036854775807"), 7162290910810015547},
  };
}

// scylladb/scylla-rust-driver, scylla/src/routing/partitioner.rs (test_murmur3_partitioner).
std::vector<Vector> RustDriverVectors() {
  return {
      {Bytes("test"), -6017608668500074083},
      {Bytes("xd"), 4507812186440344727},
      {Bytes("primary_key"), -1632642444691073360},
      {Bytes("krem\xc3\xb3wki"sv), 4354931215268080151},  // "kremówki" in UTF-8
  };
}

void ExpectVectors(const std::vector<Vector>& vectors) {
  for (const Vector& v : vectors) {
    EXPECT_EQ(Murmur3Token(v.key), v.token) << "key of " << v.key.size() << " bytes";
  }
}

TEST(Murmur3Test, GocqlVectorsCoverEveryTailLength) {
  const auto vectors = GocqlVectors();
  std::set<size_t> tails;
  for (const Vector& v : vectors) tails.insert(v.key.size() % 16);
  EXPECT_EQ(tails.size(), 16u);
  ExpectVectors(vectors);
}

TEST(Murmur3Test, PythonDriverVectors) { ExpectVectors(PythonDriverVectors()); }

TEST(Murmur3Test, RustDriverVectors) { ExpectVectors(RustDriverVectors()); }

// datastax/cpp-driver, tests/src/unit/tests/test_routing_key.cpp (values from
// the java-driver): single-column keys are the serialized value as is.
TEST(Murmur3Test, CppDriverSingleColumnKeys) {
  const std::vector<Vector> vectors = {
      {Hex("d8775a706ea411e49fa70db22d2a6140"), 6739078495667776670},  // uuid
      {Hex("075bcd15"), -567416363967733925},                          // int 123456789
      {Hex("00000000075bcd15"), 5616923877423390342},                  // bigint 123456789
      {Hex("01"), 8849112093580131862},                                // boolean true
      {Bytes("abcdefghijklmnop"), -4266531025627334877},               // text
  };
  for (const Vector& v : vectors) {
    auto key = RoutingKey({std::span<const uint8_t>(v.key)});
    ASSERT_TRUE(key.ok()) << key.status().ToString();
    EXPECT_EQ(*key, v.key);
    EXPECT_EQ(Murmur3Token(*key), v.token);
    auto token = PartitionKeyToken({std::span<const uint8_t>(v.key)});
    ASSERT_TRUE(token.ok());
    EXPECT_EQ(*token, v.token);
  }
}

TEST(Murmur3Test, CppDriverCompositeKeys) {
  const auto uuid = Hex("d8775a706ea411e49fa70db22d2a6140");
  const auto bigint = Hex("00000000075bcd15");
  const auto text = Bytes("abcdefghijklmnop");
  {
    auto key = RoutingKey({uuid, bigint, text});
    ASSERT_TRUE(key.ok());
    std::vector<uint8_t> expected = Hex("0010");
    expected.insert(expected.end(), uuid.begin(), uuid.end());
    expected.push_back(0);
    expected.insert(expected.end(), {0x00, 0x08});
    expected.insert(expected.end(), bigint.begin(), bigint.end());
    expected.push_back(0);
    expected.insert(expected.end(), {0x00, 0x10});
    expected.insert(expected.end(), text.begin(), text.end());
    expected.push_back(0);
    EXPECT_EQ(*key, expected);
    EXPECT_EQ(Murmur3Token(*key), 3838437721532426513);
    auto token = PartitionKeyToken({uuid, bigint, text});
    ASSERT_TRUE(token.ok());
    EXPECT_EQ(*token, 3838437721532426513);
  }
  {
    const auto boolean = Hex("00");
    const auto integer = Hex("075bcd15");
    const auto xyz = Bytes("xyz");
    auto key = RoutingKey({boolean, integer, xyz});
    ASSERT_TRUE(key.ok());
    EXPECT_EQ(*key, Hex("00010000" "0004075bcd1500" "000378797a00"));
    EXPECT_EQ(Murmur3Token(*key), 4466051201071860026);
    auto token = PartitionKeyToken({boolean, integer, xyz});
    ASSERT_TRUE(token.ok());
    EXPECT_EQ(*token, 4466051201071860026);
  }
}

TEST(Murmur3Test, IncrementalHashingDoesNotDependOnSplits) {
  std::vector<Vector> all = GocqlVectors();
  for (auto& v : PythonDriverVectors()) all.push_back(v);
  for (auto& v : RustDriverVectors()) all.push_back(v);
  std::mt19937 rng(0x2137);
  for (const Vector& v : all) {
    const std::span<const uint8_t> key(v.key);
    // Every two-way split.
    for (size_t cut = 0; cut <= key.size(); ++cut) {
      Murmur3Hasher h;
      h.Update(key.first(cut));
      h.Update(key.subspan(cut));
      ASSERT_EQ(h.Token(), v.token) << "cut at " << cut << " of " << key.size();
    }
    // Random many-way splits, with empty pieces and Token() in between.
    for (int round = 0; round < 20; ++round) {
      Murmur3Hasher h;
      size_t at = 0;
      while (at < key.size()) {
        size_t n = std::uniform_int_distribution<size_t>(0, key.size() - at)(rng);
        h.Update(key.subspan(at, n));
        (void)h.Token();  // must not disturb the state
        at += n;
      }
      ASSERT_EQ(h.Token(), v.token);
    }
  }
}

TEST(Murmur3Test, MinimumTokenIsNormalisedToMaximum) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  static_assert(NormalizeMurmur3Token(kMin) == kMax);
  static_assert(NormalizeMurmur3Token(kMax) == kMax);
  static_assert(NormalizeMurmur3Token(kMin + 1) == kMin + 1);
  static_assert(NormalizeMurmur3Token(0) == 0);
  static_assert(NormalizeMurmur3Token(-1) == -1);
}

TEST(Murmur3Test, EmptyKeyHasTheMinimumToken) {
  // Cassandra's Murmur3Partitioner.getToken gives MINIMUM to an empty key
  // (which servers refuse as a partition key) instead of hashing it.
  EXPECT_EQ(Murmur3Token({}), std::numeric_limits<int64_t>::min());
  Murmur3Hasher h;
  h.Update({});
  EXPECT_EQ(h.Token(), std::numeric_limits<int64_t>::min());
  h.Update(std::vector<uint8_t>{'1', '2', '3'});
  EXPECT_EQ(h.Token(), -7468325962851647638);  // python-driver's "123" vector
  // A composite key is never empty, even of empty components.
  const std::vector<uint8_t> empty;
  auto token = PartitionKeyToken({empty, empty});
  ASSERT_TRUE(token.ok());
  EXPECT_NE(*token, std::numeric_limits<int64_t>::min());
}

TEST(Murmur3Test, RoutingKeyErrors) {
  auto none = RoutingKey({});
  EXPECT_EQ(none.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(PartitionKeyToken({}).status().code(), Status::Code::kInvalidArgument);

  const std::vector<uint8_t> big(65536, 0xAB);
  const std::vector<uint8_t> max(65535, 0xAB);
  const std::vector<uint8_t> small = {1, 2, 3};
  // A single component has no length prefix: any size is fine.
  auto single = RoutingKey({big});
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->size(), big.size());
  // In a composite key each length must fit a u16.
  auto composite = RoutingKey({small, big});
  EXPECT_EQ(composite.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(composite.status().message().find("component 1"), std::string::npos)
      << composite.status().message();
  EXPECT_EQ(PartitionKeyToken({small, big}).status().code(), Status::Code::kInvalidArgument);
  auto fits = RoutingKey({small, max});
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ(fits->size(), (2 + 3 + 1) + (2 + 65535 + 1));
  EXPECT_EQ((*fits)[6], 0xFF);
  EXPECT_EQ((*fits)[7], 0xFF);
  auto token = PartitionKeyToken({small, max});
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(*token, Murmur3Token(*fits));
}

TEST(Murmur3Test, EmptyComponentsInCompositeKey) {
  const std::vector<uint8_t> empty;
  const std::vector<uint8_t> one = {7};
  auto key = RoutingKey({empty, one});
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(*key, (std::vector<uint8_t>{0, 0, 0, 0, 1, 7, 0}));
  auto token = PartitionKeyToken({empty, one});
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(*token, Murmur3Token(*key));
}

TEST(Murmur3Test, CloseComponentBuildsRoutingKeysLayoutInPlace) {
  // Components encoded straight into the key, as the session does per
  // request: the bytes RoutingKey builds from the same components.
  const std::vector<uint8_t> small = {1, 2, 3};
  const std::vector<uint8_t> max(65535, 0xAB);
  std::vector<uint8_t> key;
  for (const auto* c : {&small, &max}) {
    const size_t at = key.size();
    key.resize(at + kComponentLengthBytes);
    key.insert(key.end(), c->begin(), c->end());
    ASSERT_TRUE(CloseComponent(&key, at));
  }
  auto built = RoutingKey({small, max});
  ASSERT_TRUE(built.ok());
  EXPECT_EQ(key, *built);
  // Longer than a u16 holds: refused, nothing written.
  std::vector<uint8_t> big(kComponentLengthBytes + 65536, 0xAB);
  EXPECT_FALSE(CloseComponent(&big, 0));
  EXPECT_EQ(big.size(), kComponentLengthBytes + 65536);
  EXPECT_EQ(big[0], 0xAB);
}

}  // namespace
}  // namespace cqlstream::routing
