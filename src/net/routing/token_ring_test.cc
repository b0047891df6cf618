// Copyright (c) cqlstream authors.
#include "net/routing/token_ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace cqlstream::routing {
namespace {

using Replication = std::map<std::string, std::string>;

std::vector<int> Vec(std::span<const int> s) { return {s.begin(), s.end()}; }

RingHost Host(int id, std::vector<int64_t> tokens, std::string dc = "dc1",
              std::string rack = "rack1") {
  RingHost h;
  h.id = id;
  h.datacenter = std::move(dc);
  h.rack = std::move(rack);
  h.tokens = std::move(tokens);
  return h;
}

TokenRing MustRing(std::vector<RingHost> hosts) {
  auto ring = TokenRing::Build(std::move(hosts));
  EXPECT_TRUE(ring.ok()) << ring.status().ToString();
  return std::move(ring).value();
}

ReplicaMap MustMap(const TokenRing& ring, const Replication& replication) {
  auto map = ReplicaMap::Build(ring, replication);
  EXPECT_TRUE(map.ok()) << map.status().ToString();
  return std::move(map).value();
}

Replication Simple(int rf) {
  return {{"class", "org.apache.cassandra.locator.SimpleStrategy"},
          {"replication_factor", std::to_string(rf)}};
}

// ---------------------------------------------------------------------------
// Tokens and ranges

TEST(TokenRingTest, ParseToken) {
  EXPECT_EQ(*ParseToken("0"), 0);
  EXPECT_EQ(*ParseToken("-3074457345618258603"), -3074457345618258603);
  EXPECT_EQ(*ParseToken("9223372036854775807"), kMaxToken);
  EXPECT_EQ(*ParseToken("-9223372036854775808"), kMinToken);
  for (const char* bad : {"", "+1", " 1", "1 ", "1x", "0x10", "9223372036854775808",
                          "-9223372036854775809", "1.5", "-"}) {
    auto t = ParseToken(bad);
    EXPECT_EQ(t.status().code(), Status::Code::kInvalidArgument) << "'" << bad << "'";
  }
  auto tokens = ParseTokens({"-5", "7", "100"});
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(*tokens, (std::vector<int64_t>{-5, 7, 100}));
  auto bad = ParseTokens({"1", "two"});
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'two'"), std::string::npos);
}

void ExpectTiling(const std::vector<TokenRange>& parts, TokenRange whole, int n) {
  ASSERT_FALSE(parts.empty());
  EXPECT_EQ(parts.front().start, whole.start);
  EXPECT_EQ(parts.back().end, whole.end);
  uint64_t min_size = ~uint64_t{0}, max_size = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    ASSERT_LT(parts[i].start, parts[i].end) << i;
    if (i > 0) {
      ASSERT_EQ(parts[i].start, parts[i - 1].end) << i;
    }
    const uint64_t size =
        static_cast<uint64_t>(parts[i].end) - static_cast<uint64_t>(parts[i].start);
    min_size = std::min(min_size, size);
    max_size = std::max(max_size, size);
  }
  EXPECT_LE(max_size - min_size, 1u) << "n=" << n;
}

TEST(TokenRingTest, SplitTheFullRing) {
  auto one = SplitTokenRange(1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, (std::vector<TokenRange>{kFullRing}));

  auto two = SplitTokenRange(2);
  ASSERT_TRUE(two.ok());
  // 2^64 - 1 tokens: (MIN, -1] holds 2^63 - 1 of them, (-1, MAX] 2^63.
  EXPECT_EQ(*two, (std::vector<TokenRange>{{kMinToken, -1}, {-1, kMaxToken}}));

  auto four = SplitTokenRange(4);
  ASSERT_TRUE(four.ok());
  ASSERT_EQ(four->size(), 4u);
  EXPECT_EQ((*four)[1].start, -4611686018427387905);  // MIN + floor((2^64-1)/4)
  EXPECT_EQ((*four)[2].start, -1);
  EXPECT_EQ((*four)[3].start, 4611686018427387903);

  for (int n : {1, 2, 3, 4, 7, 10, 256, 1000, 4097}) {
    auto parts = SplitTokenRange(n);
    ASSERT_TRUE(parts.ok());
    ASSERT_EQ(parts->size(), static_cast<size_t>(n));
    ExpectTiling(*parts, kFullRing, n);
  }
}

TEST(TokenRingTest, SplitBoundariesAreExact) {
  // Boundary k of n over the full ring is MIN + floor(k * (2^64 - 1) / n);
  // checked with 128-bit arithmetic (a GCC/Clang extension).
  __extension__ typedef unsigned __int128 Uint128;
  const Uint128 width = ~uint64_t{0};
  for (int n : {3, 5, 7, 1000, 65537, 1 << 20}) {
    auto parts = SplitTokenRange(n);
    ASSERT_TRUE(parts.ok());
    ASSERT_EQ(parts->size(), static_cast<size_t>(n));
    for (size_t k = 1; k < parts->size(); ++k) {
      const auto expected = static_cast<int64_t>(static_cast<uint64_t>(kMinToken) +
                                                 static_cast<uint64_t>(width * k / n));
      ASSERT_EQ((*parts)[k].start, expected) << "n=" << n << " k=" << k;
    }
  }
}

TEST(TokenRingTest, SplitASubrange) {
  auto parts = SplitTokenRange(TokenRange{-10, 10}, 3);
  ASSERT_TRUE(parts.ok());
  ExpectTiling(*parts, TokenRange{-10, 10}, 3);
  EXPECT_EQ(*parts, (std::vector<TokenRange>{{-10, -4}, {-4, 3}, {3, 10}}));
  // Fewer tokens than parts: one part per token.
  auto small = SplitTokenRange(TokenRange{5, 7}, 4);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(*small, (std::vector<TokenRange>{{5, 6}, {6, 7}}));
  // Errors.
  EXPECT_EQ(SplitTokenRange(0).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(SplitTokenRange(-3).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(SplitTokenRange(TokenRange{7, 5}, 2).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(SplitTokenRange(TokenRange{7, 7}, 2).status().code(), Status::Code::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Ring

TEST(TokenRingTest, BuildErrors) {
  auto dup_id = TokenRing::Build({Host(1, {10}), Host(1, {20})});
  EXPECT_EQ(dup_id.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(dup_id.status().message().find("id 1"), std::string::npos);

  auto dup_token = TokenRing::Build({Host(1, {10, 20}), Host(2, {20})});
  EXPECT_EQ(dup_token.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(dup_token.status().message().find("token 20 is listed by host 1 and by host 2"),
            std::string::npos)
      << dup_token.status().message();

  auto empty = TokenRing::Build({});
  EXPECT_EQ(empty.status().code(), Status::Code::kInvalidArgument);
  auto no_tokens = TokenRing::Build({Host(1, {}), Host(2, {})});
  EXPECT_EQ(no_tokens.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(no_tokens.status().message().find("none of the 2 hosts"), std::string::npos);

  // A host listing a token twice is not an error.
  auto twice = TokenRing::Build({Host(1, {10, 10, 5})});
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice->size(), 2u);
}

TEST(TokenRingTest, OneNodeOwnsEverything) {
  TokenRing ring = MustRing({Host(7, {42})});
  EXPECT_EQ(ring.size(), 1u);
  for (int64_t t : {kMinToken, int64_t{-1}, int64_t{41}, int64_t{42}, int64_t{43}, kMaxToken}) {
    EXPECT_EQ(ring.RangeIndexOf(t), 0u);
    EXPECT_EQ(ring.PrimaryOwner(t), 7);
  }
  EXPECT_EQ(ring.PrimaryRanges(7), (std::vector<TokenRange>{kFullRing}));
  ReplicaMap map = MustMap(ring, Simple(3));  // RF above the host count
  EXPECT_EQ(Vec(map.Replicas(0)), std::vector<int>{7});
  EXPECT_EQ(Vec(map.Replicas(kMaxToken)), std::vector<int>{7});
  auto ranges = map.Ranges();
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].range, (TokenRange{kMinToken, 42}));
  EXPECT_EQ(ranges[1].range, (TokenRange{42, kMaxToken}));
  EXPECT_EQ(Vec(ranges[1].replicas), std::vector<int>{7});
}

// Three nodes A=1 @ -100, B=2 @ 0, C=3 @ 100.
TokenRing ThreeNodes() { return MustRing({Host(2, {0}), Host(3, {100}), Host(1, {-100})}); }

TEST(TokenRingTest, RangesAreLeftOpenRightClosed) {
  TokenRing ring = ThreeNodes();
  EXPECT_EQ(std::vector<int64_t>(ring.tokens().begin(), ring.tokens().end()),
            (std::vector<int64_t>{-100, 0, 100}));
  // A token equal to a host's token belongs to that host's range (prev, tok].
  EXPECT_EQ(ring.PrimaryOwner(-100), 1);
  EXPECT_EQ(ring.PrimaryOwner(-99), 2);
  EXPECT_EQ(ring.PrimaryOwner(0), 2);
  EXPECT_EQ(ring.PrimaryOwner(1), 3);
  EXPECT_EQ(ring.PrimaryOwner(100), 3);
  // Past the last token the ring wraps to the first.
  EXPECT_EQ(ring.PrimaryOwner(101), 1);
  EXPECT_EQ(ring.PrimaryOwner(kMaxToken), 1);
  EXPECT_EQ(ring.PrimaryOwner(kMinToken), 1);
  EXPECT_EQ(ring.RangeIndexOf(101), 0u);
  EXPECT_EQ(ring.RangeIndexOf(-100), 0u);
  EXPECT_EQ(ring.RangeIndexOf(50), 2u);
}

TEST(TokenRingTest, SimpleStrategyOnThreeNodes) {
  TokenRing ring = ThreeNodes();
  ReplicaMap rf1 = MustMap(ring, Simple(1));
  EXPECT_EQ(Vec(rf1.Replicas(-100)), std::vector<int>{1});
  EXPECT_EQ(Vec(rf1.Replicas(-50)), std::vector<int>{2});
  EXPECT_EQ(Vec(rf1.Replicas(50)), std::vector<int>{3});
  EXPECT_EQ(Vec(rf1.Replicas(150)), std::vector<int>{1});

  ReplicaMap rf2 = MustMap(ring, Simple(2));
  EXPECT_EQ(Vec(rf2.Replicas(-100)), (std::vector<int>{1, 2}));
  EXPECT_EQ(Vec(rf2.Replicas(0)), (std::vector<int>{2, 3}));
  EXPECT_EQ(Vec(rf2.Replicas(50)), (std::vector<int>{3, 1}));   // wraps
  EXPECT_EQ(Vec(rf2.Replicas(150)), (std::vector<int>{1, 2}));  // wraps

  ReplicaMap rf3 = MustMap(ring, Simple(3));
  EXPECT_EQ(Vec(rf3.Replicas(-100)), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(Vec(rf3.Replicas(1)), (std::vector<int>{3, 1, 2}));
  EXPECT_EQ(Vec(rf3.Replicas(kMaxToken)), (std::vector<int>{1, 2, 3}));

  ReplicaMap rf5 = MustMap(ring, Simple(5));  // more than the hosts: all of them
  EXPECT_EQ(Vec(rf5.Replicas(-1)), (std::vector<int>{2, 3, 1}));

  ReplicaMap rf0 = MustMap(ring, Simple(0));
  EXPECT_TRUE(rf0.Replicas(5).empty());
}

// datastax/cpp-driver tests/src/unit/tests/test_replication_strategy.cpp
// (ReplicationStrategyUnitTest.Simple and .SimpleNumHostsLessThanReplicationFactor).
TEST(TokenRingTest, CppDriverSimpleStrategy) {
  TokenRing ring = MustRing({Host(1, {0}), Host(2, {100}), Host(3, {200}), Host(4, {300})});
  ReplicaMap map = MustMap(ring, Simple(3));
  EXPECT_EQ(Vec(map.Replicas(0)), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(Vec(map.Replicas(100)), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(Vec(map.Replicas(200)), (std::vector<int>{3, 4, 1}));
  EXPECT_EQ(Vec(map.Replicas(300)), (std::vector<int>{4, 1, 2}));

  TokenRing vnodes = MustRing({Host(1, {0, 100, 200, 300})});
  ReplicaMap one_host = MustMap(vnodes, Simple(3));
  EXPECT_EQ(Vec(one_host.Replicas(0)), std::vector<int>{1});
}

// datastax/python-driver tests/unit/test_metadata.py
// (test_simple_strategy_make_token_replica_map).
TEST(TokenRingTest, PythonDriverSimpleStrategy) {
  TokenRing ring = MustRing({Host(1, {0}), Host(2, {100}), Host(3, {200})});
  ReplicaMap rf2 = MustMap(ring, Simple(2));
  EXPECT_EQ(Vec(rf2.Replicas(0)), (std::vector<int>{1, 2}));
  EXPECT_EQ(Vec(rf2.Replicas(100)), (std::vector<int>{2, 3}));
  EXPECT_EQ(Vec(rf2.Replicas(200)), (std::vector<int>{3, 1}));
  ReplicaMap rf3 = MustMap(ring, Simple(3));
  EXPECT_EQ(Vec(rf3.Replicas(200)), (std::vector<int>{3, 1, 2}));
}

TEST(TokenRingTest, VnodesSkipHostsAlreadyTaken) {
  // A=1 owns 10 and 20, B=2 owns 30, C=3 owns 40.
  TokenRing ring = MustRing({Host(1, {10, 20}), Host(2, {30}), Host(3, {40})});
  ReplicaMap map = MustMap(ring, Simple(2));
  EXPECT_EQ(Vec(map.Replicas(5)), (std::vector<int>{1, 2}));  // walks 10(A), 20(A), 30(B)
  EXPECT_EQ(Vec(map.Replicas(35)), (std::vector<int>{3, 1}));
}

// ---------------------------------------------------------------------------
// NetworkTopologyStrategy

// datastax/cpp-driver test_replication_strategy.cpp (NetworkTopology): two
// DCs of two racks, RF 2 each. Host ids: 11..14 = 1.0.0.1..4, 21..24 = 2.0.0.1..4.
TEST(TokenRingTest, CppDriverNetworkTopology) {
  TokenRing ring = MustRing({
      Host(11, {0}, "dc1", "rack1"),   Host(12, {100}, "dc1", "rack1"),
      Host(13, {200}, "dc1", "rack2"), Host(14, {300}, "dc1", "rack2"),
      Host(21, {400}, "dc2", "rack1"), Host(22, {500}, "dc2", "rack1"),
      Host(23, {600}, "dc2", "rack2"), Host(24, {700}, "dc2", "rack2"),
  });
  ReplicaMap map = MustMap(
      ring, {{"class", "NetworkTopologyStrategy"}, {"dc1", "2"}, {"dc2", "2"}});
  EXPECT_EQ(Vec(map.Replicas(0)), (std::vector<int>{11, 13, 21, 23}));
  EXPECT_EQ(Vec(map.Replicas(100)), (std::vector<int>{12, 13, 21, 23}));
  EXPECT_EQ(Vec(map.Replicas(200)), (std::vector<int>{13, 21, 23, 11}));
  EXPECT_EQ(Vec(map.Replicas(300)), (std::vector<int>{14, 21, 23, 11}));
  EXPECT_EQ(Vec(map.Replicas(400)), (std::vector<int>{21, 23, 11, 13}));
  EXPECT_EQ(Vec(map.Replicas(500)), (std::vector<int>{22, 23, 11, 13}));
  EXPECT_EQ(Vec(map.Replicas(600)), (std::vector<int>{23, 11, 13, 21}));
  EXPECT_EQ(Vec(map.Replicas(700)), (std::vector<int>{24, 11, 13, 21}));
  // Between tokens and past the end.
  EXPECT_EQ(Vec(map.Replicas(650)), (std::vector<int>{24, 11, 13, 21}));
  EXPECT_EQ(Vec(map.Replicas(701)), (std::vector<int>{11, 13, 21, 23}));
}

// datastax/cpp-driver test_replication_strategy.cpp (NetworkTopologySameRack).
TEST(TokenRingTest, CppDriverNetworkTopologySameRack) {
  TokenRing ring = MustRing({
      Host(11, {100}, "dc1", "rack1"), Host(12, {200}, "dc1", "rack1"),
      Host(13, {300}, "dc1", "rack1"), Host(21, {400}, "dc2", "rack1"),
      Host(22, {500}, "dc2", "rack1"), Host(23, {600}, "dc2", "rack1"),
  });
  ReplicaMap map = MustMap(
      ring, {{"class", "NetworkTopologyStrategy"}, {"dc1", "2"}, {"dc2", "1"}});
  EXPECT_EQ(Vec(map.Replicas(100)), (std::vector<int>{11, 12, 21}));
  EXPECT_EQ(Vec(map.Replicas(200)), (std::vector<int>{12, 13, 21}));
  EXPECT_EQ(Vec(map.Replicas(300)), (std::vector<int>{13, 21, 11}));
  EXPECT_EQ(Vec(map.Replicas(400)), (std::vector<int>{21, 11, 12}));
  EXPECT_EQ(Vec(map.Replicas(500)), (std::vector<int>{22, 11, 12}));
  EXPECT_EQ(Vec(map.Replicas(600)), (std::vector<int>{23, 11, 12}));
}

// datastax/cpp-driver test_replication_strategy.cpp (NetworkTopologyNotEnoughRacks):
// RF 3 over racks {rack1: 3 hosts, rack2: 1 host}. The cpp-driver orders rack
// repeats after the distinct racks (e.g. 1, 4, 2 at token 100); Cassandra >= 3
// (and ScyllaDB) take the first rack repeat as the walk meets it (allowance
// RF - racks = 1): same hosts, order 1, 2, 4.
TEST(TokenRingTest, NetworkTopologyNotEnoughRacks) {
  TokenRing ring = MustRing({
      Host(1, {100}, "dc1", "rack1"), Host(2, {200}, "dc1", "rack1"),
      Host(3, {300}, "dc1", "rack1"), Host(4, {400}, "dc1", "rack2"),
  });
  ReplicaMap map = MustMap(ring, {{"class", "NetworkTopologyStrategy"}, {"dc1", "3"}});
  const std::map<int64_t, std::vector<int>> cpp_driver = {
      {100, {1, 4, 2}}, {200, {2, 4, 3}}, {300, {3, 4, 1}}, {400, {4, 1, 2}}};
  const std::map<int64_t, std::vector<int>> cassandra = {
      {100, {1, 2, 4}}, {200, {2, 3, 4}}, {300, {3, 4, 1}}, {400, {4, 1, 2}}};
  for (const auto& [token, expected] : cassandra) {
    std::vector<int> got = Vec(map.Replicas(token));
    EXPECT_EQ(got, expected) << "token " << token;
    std::vector<int> a = got, b = cpp_driver.at(token);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    EXPECT_EQ(a, b) << "token " << token;
  }
}

// datastax/python-driver tests/unit/test_metadata.py
// (test_nts_make_token_replica_map, test_nts_make_token_replica_map_empty_dc).
TEST(TokenRingTest, PythonDriverNetworkTopology) {
  TokenRing ring = MustRing({
      Host(11, {0}, "dc1", "rack1"),  Host(12, {100}, "dc1", "rack1"),
      Host(13, {200}, "dc1", "rack1"), Host(21, {1}, "dc2", "rack1"),
      Host(22, {101}, "dc2", "rack1"), Host(31, {2}, "dc3", "rack3"),
  });
  ReplicaMap map = MustMap(ring, {{"class", "NetworkTopologyStrategy"},
                                  {"dc1", "2"}, {"dc2", "2"}, {"dc3", "1"}});
  // The Python test compares sets; this is also Cassandra's order.
  EXPECT_EQ(Vec(map.Replicas(0)), (std::vector<int>{11, 21, 31, 12, 22}));

  TokenRing one = MustRing({Host(1, {0}, "dc1", "rack1")});
  ReplicaMap empty_dc = MustMap(one, {{"class", "NetworkTopologyStrategy"}, {"dc1", "1"},
                                      {"dc2", "0"}});
  EXPECT_EQ(Vec(empty_dc.Replicas(0)), std::vector<int>{1});
}

TEST(TokenRingTest, NetworkTopologyTwoDatacentersWithRacks) {
  // dc1: racks a, a, b, c; dc2: racks x, y. Interleaved tokens.
  TokenRing ring = MustRing({
      Host(1, {10}, "dc1", "a"), Host(2, {20}, "dc1", "a"), Host(3, {30}, "dc2", "x"),
      Host(4, {40}, "dc1", "b"), Host(5, {50}, "dc2", "x"), Host(6, {60}, "dc1", "c"),
      Host(7, {70}, "dc2", "y"),
  });
  ReplicaMap map = MustMap(ring, {{"class", "NetworkTopologyStrategy"}, {"dc1", "3"},
                                  {"dc2", "2"}});
  // From 10: dc1 takes 1(a), skips 2 (a again; 3 racks for RF 3: no repeat
  // allowed), takes 4(b), 6(c); dc2 takes 3(x), skips 5(x), takes 7(y).
  EXPECT_EQ(Vec(map.Replicas(10)), (std::vector<int>{1, 3, 4, 6, 7}));
  // From 20: 2(a), 3(x), 4(b), 5 skipped, 6(c), 7(y).
  EXPECT_EQ(Vec(map.Replicas(15)), (std::vector<int>{2, 3, 4, 6, 7}));
  // From 50 (wraps): 5(x), 6(c), 7(y), 1(a), 2 skipped, 4(b).
  EXPECT_EQ(Vec(map.Replicas(45)), (std::vector<int>{5, 6, 7, 1, 4}));
  // dc1 RF 5 > 4 hosts: all of dc1; racks first, then the repeat (2 after 1).
  ReplicaMap big = MustMap(ring, {{"class", "NetworkTopologyStrategy"}, {"dc1", "5"}});
  EXPECT_EQ(Vec(big.Replicas(10)), (std::vector<int>{1, 2, 4, 6}));
  EXPECT_EQ(Vec(big.Replicas(25)), (std::vector<int>{4, 6, 1, 2}));
}

TEST(TokenRingTest, NetworkTopologySameRackNamesInTwoDatacenters) {
  // Racks are per DC: "r1" of dc1 is not "r1" of dc2.
  TokenRing ring = MustRing({
      Host(1, {10}, "dc1", "r1"), Host(2, {20}, "dc2", "r1"), Host(3, {30}, "dc1", "r2"),
      Host(4, {40}, "dc2", "r2"),
  });
  ReplicaMap map = MustMap(ring, {{"class", "NetworkTopologyStrategy"}, {"dc1", "2"},
                                  {"dc2", "2"}});
  EXPECT_EQ(Vec(map.Replicas(10)), (std::vector<int>{1, 2, 3, 4}));
}

TEST(TokenRingTest, NetworkTopologyHostsWithoutTokensDoNotCount) {
  TokenRing ring = MustRing({Host(1, {10}, "dc1", "a"), Host(2, {}, "dc1", "b"),
                             Host(3, {30}, "dc1", "a")});
  // RF 2; racks with tokens: only "a" (1 rack), so one repeat is allowed.
  ReplicaMap map = MustMap(ring, {{"class", "NetworkTopologyStrategy"}, {"dc1", "2"}});
  EXPECT_EQ(Vec(map.Replicas(10)), (std::vector<int>{1, 3}));
  EXPECT_TRUE(ring.PrimaryRanges(2).empty());
}

TEST(TokenRingTest, NetworkTopologyMissingDatacenters) {
  TokenRing ring = MustRing({Host(1, {10}, "dc1", "a"), Host(2, {20}, "dc2", "a")});
  // A DC without hosts is skipped while another DC has some.
  ReplicaMap map = MustMap(ring, {{"class", "NetworkTopologyStrategy"}, {"dc1", "1"},
                                  {"dc9", "3"}});
  EXPECT_EQ(Vec(map.Replicas(15)), std::vector<int>{1});
  // None of the keyspace's DCs has a host: an error naming both sides.
  auto none = ReplicaMap::Build(ring, {{"class", "NetworkTopologyStrategy"}, {"DC1", "3"},
                                       {"dc9", "1"}});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Status::Code::kNotFound);
  EXPECT_NE(none.status().message().find("{DC1, dc9}"), std::string::npos)
      << none.status().message();
  EXPECT_NE(none.status().message().find("{dc1, dc2}"), std::string::npos)
      << none.status().message();
  // All factors 0: no replicas, no error.
  ReplicaMap zero = MustMap(ring, {{"class", "NetworkTopologyStrategy"}, {"dc1", "0"}});
  EXPECT_TRUE(zero.Replicas(15).empty());
}

// A direct transcription of Cassandra's one-pass walk (one full turn of the
// ring, a rack/host seen set, per-DC RF and rack-repeat allowance), used as an
// oracle on random rings.
std::vector<int> ReferenceNetworkTopology(const std::vector<RingHost>& hosts,
                                          const std::map<std::string, int>& factors,
                                          int64_t token) {
  std::vector<std::pair<int64_t, size_t>> ring;
  std::map<std::string, std::set<int>> dc_nodes;
  std::map<std::string, std::set<std::string>> dc_racks;
  for (size_t p = 0; p < hosts.size(); ++p) {
    for (int64_t t : hosts[p].tokens) ring.emplace_back(t, p);
    if (!hosts[p].tokens.empty()) {
      dc_nodes[hosts[p].datacenter].insert(hosts[p].id);
      dc_racks[hosts[p].datacenter].insert(hosts[p].rack);
    }
  }
  std::sort(ring.begin(), ring.end());
  ring.erase(std::unique(ring.begin(), ring.end()), ring.end());
  struct Dc {
    int rf_left;
    int repeats;
  };
  std::map<std::string, Dc> dcs;
  for (const auto& [dc, rf] : factors) {
    const int nodes = static_cast<int>(dc_nodes[dc].size());
    if (rf <= 0 || nodes == 0) continue;
    dcs[dc] = {std::min(rf, nodes), rf - static_cast<int>(dc_racks[dc].size())};
  }
  size_t start = 0;
  while (start < ring.size() && ring[start].first < token) ++start;
  if (start == ring.size()) start = 0;
  std::vector<int> out;
  std::set<std::pair<std::string, std::string>> seen_racks;
  std::set<int> taken;
  for (size_t k = 0; k < ring.size(); ++k) {
    const RingHost& h = hosts[ring[(start + k) % ring.size()].second];
    auto it = dcs.find(h.datacenter);
    if (it == dcs.end() || it->second.rf_left == 0) continue;
    Dc& d = it->second;
    if (seen_racks.insert({h.datacenter, h.rack}).second) {
      taken.insert(h.id);
      out.push_back(h.id);
      --d.rf_left;
    } else if (d.repeats > 0 && taken.insert(h.id).second) {
      out.push_back(h.id);
      --d.repeats;
      --d.rf_left;
    }
  }
  return out;
}

std::vector<int> ReferenceSimple(const std::vector<RingHost>& hosts, int rf, int64_t token) {
  std::vector<std::pair<int64_t, int>> ring;
  for (const RingHost& h : hosts) {
    for (int64_t t : h.tokens) ring.emplace_back(t, h.id);
  }
  std::sort(ring.begin(), ring.end());
  size_t start = 0;
  while (start < ring.size() && ring[start].first < token) ++start;
  std::vector<int> out;
  for (size_t k = 0; k < ring.size() && static_cast<int>(out.size()) < rf; ++k) {
    const int id = ring[(start + k) % ring.size()].second;
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  }
  return out;
}

TEST(TokenRingTest, RandomRingsMatchTheReferenceWalk) {
  std::mt19937_64 rng(20240229);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  const std::vector<std::string> dc_names = {"dc1", "dc2", "dc3"};
  const std::vector<std::string> rack_names = {"r1", "r2", "r3"};
  int checked = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<RingHost> hosts;
    std::set<int64_t> used;
    const int host_count = 1 + pick(9);
    for (int h = 0; h < host_count; ++h) {
      RingHost host = Host(100 + h, {}, dc_names[static_cast<size_t>(pick(3))],
                           rack_names[static_cast<size_t>(pick(3))]);
      const int tokens = pick(6);  // some hosts own nothing
      for (int t = 0; t < tokens; ++t) {
        // Small token space so that queries hit ring tokens and neighbours.
        const int64_t token = static_cast<int64_t>(pick(2000)) - 1000;
        if (used.insert(token).second) host.tokens.push_back(token);
      }
      hosts.push_back(std::move(host));
    }
    if (used.empty()) {
      hosts[0].tokens.push_back(0);
      used.insert(0);
    }
    auto ring = TokenRing::Build(hosts);
    ASSERT_TRUE(ring.ok()) << ring.status().ToString();

    std::map<std::string, int> factors;
    Replication nts = {{"class", "NetworkTopologyStrategy"}};
    for (const std::string& dc : {std::string("dc1"), std::string("dc2"), std::string("dc3"),
                                  std::string("dc9")}) {
      if (pick(4) == 0) continue;
      const int rf = pick(5);
      factors[dc] = rf;
      nts[dc] = std::to_string(rf);
    }
    const int simple_rf = pick(6);
    auto nts_map = ReplicaMap::Build(*ring, nts);
    auto simple_map = ReplicaMap::Build(*ring, Simple(simple_rf));
    ASSERT_TRUE(simple_map.ok());

    std::vector<int64_t> queries = {kMinToken, kMaxToken, -1000, 1000};
    for (int64_t t : used) {
      queries.push_back(t - 1);
      queries.push_back(t);
      queries.push_back(t + 1);
    }
    for (int64_t q : queries) {
      EXPECT_EQ(Vec(simple_map->Replicas(q)), ReferenceSimple(hosts, simple_rf, q))
          << "round " << round << " token " << q;
      const std::vector<int> expected = ReferenceNetworkTopology(hosts, factors, q);
      if (nts_map.ok()) {
        ASSERT_EQ(Vec(nts_map->Replicas(q)), expected) << "round " << round << " token " << q;
        ++checked;
      } else {
        // Only when every DC asking for replicas has no host.
        ASSERT_EQ(nts_map.status().code(), Status::Code::kNotFound);
        ASSERT_TRUE(expected.empty());
      }
    }
  }
  EXPECT_GT(checked, 5000);
}

// ---------------------------------------------------------------------------
// Other strategies, parsing

TEST(TokenRingTest, LocalAndEverywhereStrategies) {
  TokenRing ring = ThreeNodes();
  ReplicaMap local = MustMap(ring, {{"class", "org.apache.cassandra.locator.LocalStrategy"}});
  EXPECT_TRUE(local.Replicas(0).empty());
  EXPECT_EQ(local.strategy().kind, ReplicationStrategy::Kind::kLocal);
  ReplicaMap everywhere =
      MustMap(ring, {{"class", "org.apache.cassandra.locator.EverywhereStrategy"}});
  EXPECT_EQ(Vec(everywhere.Replicas(0)), (std::vector<int>{2, 3, 1}));
  EXPECT_EQ(Vec(everywhere.Replicas(101)), (std::vector<int>{1, 2, 3}));

  // With vnodes: the primary owner, then the fixed cyclic order 1, 2, 3 (a
  // ring walk from 30 would give 1, 3, 2).
  TokenRing vnodes = MustRing({Host(1, {10, 30}), Host(2, {20}), Host(3, {40})});
  ReplicaMap all = MustMap(vnodes, {{"class", "EverywhereStrategy"}});
  EXPECT_EQ(Vec(all.Replicas(25)), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(Vec(all.Replicas(35)), (std::vector<int>{3, 1, 2}));
  EXPECT_EQ(Vec(all.Replicas(15)), (std::vector<int>{2, 3, 1}));
  for (const auto& r : all.Ranges()) {
    std::vector<int> ids = Vec(r.replicas);
    EXPECT_EQ(ids.front(), vnodes.PrimaryOwner(r.range.end));
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, (std::vector<int>{1, 2, 3}));
  }
}

TEST(TokenRingTest, ParseReplication) {
  auto simple = ReplicationStrategy::Parse(
      {{"class", "org.apache.cassandra.locator.SimpleStrategy"}, {"replication_factor", "3"}});
  ASSERT_TRUE(simple.ok());
  EXPECT_EQ(simple->kind, ReplicationStrategy::Kind::kSimple);
  EXPECT_EQ(simple->replication_factor, 3);

  auto short_name = ReplicationStrategy::Parse({{"class", "SimpleStrategy"},
                                                {"replication_factor", "2"}});
  ASSERT_TRUE(short_name.ok());
  EXPECT_EQ(short_name->replication_factor, 2);

  auto transient = ReplicationStrategy::Parse({{"class", "SimpleStrategy"},
                                               {"replication_factor", "3/1"}});
  ASSERT_TRUE(transient.ok());
  EXPECT_EQ(transient->replication_factor, 3);  // the full count, transient replicas included

  auto nts = ReplicationStrategy::Parse(
      {{"class", "org.apache.cassandra.locator.NetworkTopologyStrategy"},
       {"dc1", "3"},
       {"dc2", "2/1"},
       {"analytics", "0"}});
  ASSERT_TRUE(nts.ok());
  EXPECT_EQ(nts->kind, ReplicationStrategy::Kind::kNetworkTopology);
  EXPECT_EQ(nts->dc_factors,
            (std::map<std::string, int>{{"dc1", 3}, {"dc2", 2}, {"analytics", 0}}));

  auto everywhere = ReplicationStrategy::Parse({{"class", "EverywhereStrategy"}});
  ASSERT_TRUE(everywhere.ok());
  EXPECT_EQ(everywhere->kind, ReplicationStrategy::Kind::kEverywhere);
}

TEST(TokenRingTest, ParseReplicationErrors) {
  struct Case {
    Replication replication;
    Status::Code code;
    const char* message_part;
  };
  const std::vector<Case> cases = {
      {{{"replication_factor", "3"}}, Status::Code::kInvalidArgument, "no 'class'"},
      {{{"class", "OldNetworkTopologyStrategy"}}, Status::Code::kUnsupported,
       "'OldNetworkTopologyStrategy'"},
      {{{"class", "com.example.MyStrategy"}, {"replication_factor", "3"}},
       Status::Code::kUnsupported, "com.example.MyStrategy"},
      {{{"class", "SimpleStrategy"}}, Status::Code::kInvalidArgument, "no 'replication_factor'"},
      {{{"class", "SimpleStrategy"}, {"replication_factor", "three"}},
       Status::Code::kInvalidArgument, "'three'"},
      {{{"class", "SimpleStrategy"}, {"replication_factor", "-1"}},
       Status::Code::kInvalidArgument, "'-1'"},
      {{{"class", "SimpleStrategy"}, {"replication_factor", ""}}, Status::Code::kInvalidArgument,
       "''"},
      {{{"class", "SimpleStrategy"}, {"replication_factor", "3/"}},
       Status::Code::kInvalidArgument, "transient"},
      {{{"class", "SimpleStrategy"}, {"replication_factor", "2/2"}},
       Status::Code::kInvalidArgument, "no full replica"},
      {{{"class", "SimpleStrategy"}, {"replication_factor", "99999999999"}},
       Status::Code::kInvalidArgument, "99999999999"},
      {{{"class", "NetworkTopologyStrategy"}, {"dc1", "x"}}, Status::Code::kInvalidArgument,
       "'dc1'"},
      {{{"class", "NetworkTopologyStrategy"}, {"replication_factor", "3"}},
       Status::Code::kInvalidArgument, "one factor per datacenter"},
      {{{"class", "NetworkTopologyStrategy"}, {"dc1", "3"}, {"initial_tablets", "8"}},
       Status::Code::kUnsupported, "tablets"},
  };
  TokenRing ring = ThreeNodes();
  for (const Case& c : cases) {
    auto parsed = ReplicationStrategy::Parse(c.replication);
    ASSERT_FALSE(parsed.ok()) << c.message_part;
    EXPECT_EQ(parsed.status().code(), c.code) << parsed.status().ToString();
    EXPECT_NE(parsed.status().message().find(c.message_part), std::string::npos)
        << parsed.status().message() << " lacks " << c.message_part;
    // Build() from the map reports the same error.
    auto built = ReplicaMap::Build(ring, c.replication);
    EXPECT_EQ(built.status().ToString(), parsed.status().ToString());
  }
}

// ---------------------------------------------------------------------------
// Primary ranges and scan ranges

TEST(TokenRingTest, PrimaryRanges) {
  TokenRing ring = ThreeNodes();
  EXPECT_EQ(ring.PrimaryRanges(1),
            (std::vector<TokenRange>{{kMinToken, -100}, {100, kMaxToken}}));
  EXPECT_EQ(ring.PrimaryRanges(2), (std::vector<TokenRange>{{-100, 0}}));
  EXPECT_EQ(ring.PrimaryRanges(3), (std::vector<TokenRange>{{0, 100}}));
  EXPECT_TRUE(ring.PrimaryRanges(99).empty());
  auto by_host = ring.PrimaryRangesByHost();
  EXPECT_EQ(by_host.size(), 3u);
  EXPECT_EQ(by_host[1], ring.PrimaryRanges(1));

  // Consecutive tokens of one host merge into one range.
  TokenRing vnodes = MustRing({Host(1, {10, 20}), Host(2, {30})});
  EXPECT_EQ(vnodes.PrimaryRanges(1),
            (std::vector<TokenRange>{{kMinToken, 20}, {30, kMaxToken}}));

  // Ring tokens at the very ends of the token space leave no empty piece.
  TokenRing ends = MustRing({Host(1, {kMinToken}), Host(2, {0}), Host(3, {kMaxToken})});
  EXPECT_EQ(ends.PrimaryRanges(1), std::vector<TokenRange>{});  // (MAX, MIN] holds no token
  EXPECT_EQ(ends.PrimaryRanges(2), (std::vector<TokenRange>{{kMinToken, 0}}));
  EXPECT_EQ(ends.PrimaryRanges(3), (std::vector<TokenRange>{{0, kMaxToken}}));
}

TEST(TokenRingTest, PrimaryRangesTileTheRing) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::vector<RingHost> hosts;
    for (int h = 0; h < 1 + static_cast<int>(rng() % 6); ++h) {
      RingHost host = Host(h, {});
      for (int t = 0; t < static_cast<int>(rng() % 8); ++t) {
        host.tokens.push_back(static_cast<int64_t>(rng()));
      }
      hosts.push_back(std::move(host));
    }
    hosts[0].tokens.push_back(static_cast<int64_t>(rng()));
    auto ring = TokenRing::Build(hosts);
    ASSERT_TRUE(ring.ok());
    std::vector<std::pair<TokenRange, int>> all;
    for (const auto& [host, ranges] : ring->PrimaryRangesByHost()) {
      for (const TokenRange& r : ranges) {
        ASSERT_LT(r.start, r.end);
        all.emplace_back(r, host);
        // Every token of the range is owned by this host (check the ends).
        EXPECT_EQ(ring->PrimaryOwner(r.end), host);
        EXPECT_EQ(ring->PrimaryOwner(r.start + 1), host);
      }
    }
    std::sort(all.begin(), all.end(),
              [](const auto& a, const auto& b) { return a.first.start < b.first.start; });
    ASSERT_FALSE(all.empty());
    EXPECT_EQ(all.front().first.start, kMinToken);
    EXPECT_EQ(all.back().first.end, kMaxToken);
    for (size_t i = 1; i < all.size(); ++i) {
      EXPECT_EQ(all[i].first.start, all[i - 1].first.end);
    }
  }
}

TEST(TokenRingTest, ScanRangesWithReplicas) {
  TokenRing ring = ThreeNodes();
  ReplicaMap map = MustMap(ring, Simple(2));
  auto ranges = map.Ranges();
  ASSERT_EQ(ranges.size(), 4u);  // 3 ranges, the wrapping one in two pieces
  EXPECT_EQ(ranges[0].range, (TokenRange{kMinToken, -100}));
  EXPECT_EQ(Vec(ranges[0].replicas), (std::vector<int>{1, 2}));
  EXPECT_EQ(ranges[1].range, (TokenRange{-100, 0}));
  EXPECT_EQ(Vec(ranges[1].replicas), (std::vector<int>{2, 3}));
  EXPECT_EQ(ranges[2].range, (TokenRange{0, 100}));
  EXPECT_EQ(Vec(ranges[2].replicas), (std::vector<int>{3, 1}));
  EXPECT_EQ(ranges[3].range, (TokenRange{100, kMaxToken}));
  EXPECT_EQ(Vec(ranges[3].replicas), (std::vector<int>{1, 2}));
  // Each piece's replicas are those of any token inside it.
  for (const auto& r : ranges) {
    EXPECT_EQ(Vec(r.replicas), Vec(map.Replicas(r.range.end)));
    EXPECT_EQ(Vec(r.replicas), Vec(map.Replicas(r.range.start + 1)));
  }

  // Ring tokens at both ends of the token space: the wrapping range
  // (MAX, MIN] holds no token and gives no piece.
  TokenRing ends = MustRing({Host(1, {kMinToken}), Host(2, {0}), Host(3, {kMaxToken})});
  ReplicaMap ends_map = MustMap(ends, Simple(1));
  auto end_ranges = ends_map.Ranges();
  ASSERT_EQ(end_ranges.size(), 2u);
  EXPECT_EQ(end_ranges[0].range, (TokenRange{kMinToken, 0}));
  EXPECT_EQ(Vec(end_ranges[0].replicas), std::vector<int>{2});
  EXPECT_EQ(end_ranges[1].range, (TokenRange{0, kMaxToken}));
  EXPECT_EQ(Vec(end_ranges[1].replicas), std::vector<int>{3});
}

// Spans cannot be taken from a temporary map (whose data may die with it).
template <typename M>
concept SpansFrom = requires(M&& m) {
  std::forward<M>(m).Ranges();
  std::forward<M>(m).Replicas(int64_t{0});
  std::forward<M>(m).ReplicasOfRange(size_t{0});
};
static_assert(SpansFrom<ReplicaMap&>);
static_assert(SpansFrom<const ReplicaMap&>);
static_assert(!SpansFrom<ReplicaMap>);

TEST(TokenRingTest, CopiesOutliveTheOriginals) {
  std::optional<ReplicaMap> kept;
  {
    TokenRing ring = ThreeNodes();
    ReplicaMap map = MustMap(ring, Simple(3));
    kept = map;
  }  // the ring and the map it was copied from are gone
  EXPECT_EQ(Vec(kept->Replicas(0)), (std::vector<int>{2, 3, 1}));
  EXPECT_EQ(kept->ring().PrimaryOwner(0), 2);
  EXPECT_EQ(kept->ring().hosts().size(), 3u);
}

}  // namespace
}  // namespace cqlstream::routing
