// Copyright (c) cqlstream authors.
//
// ReplicaMap under NetworkTopologyStrategy: the public drivers' cases and
// random rings checked against a transcription of Cassandra's walk.
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

}  // namespace
}  // namespace cqlstream::routing
