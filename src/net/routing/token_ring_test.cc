// Copyright (c) cqlstream authors.
//
// TokenRing and ReplicaMap: tokens and ranges, the ring, SimpleStrategy,
// the other strategies and their options, primary and scan ranges
// (NetworkTopologyStrategy: token_ring_topology_test.cc).
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

#include "net/routing/token_ring_test_util.h"

namespace cqlstream::routing {
namespace {

using testing::Host;
using testing::MustMap;
using testing::MustRing;
using testing::Replication;
using testing::Simple;
using testing::Vec;

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
