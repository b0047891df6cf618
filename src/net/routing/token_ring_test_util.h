// Copyright (c) cqlstream authors.
//
// Helpers of the token ring's unit tests (token_ring_test.cc,
// token_ring_topology_test.cc): hosts, rings and replica maps built or the
// test fails, SimpleStrategy options.
//
// Thread-safety: single-threaded test code. Test-only; not part of
// cqlstream_routing.
#ifndef CQLSTREAM_NET_ROUTING_TOKEN_RING_TEST_UTIL_H_
#define CQLSTREAM_NET_ROUTING_TOKEN_RING_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "net/routing/token_ring.h"

namespace cqlstream::routing::testing {

using Replication = std::map<std::string, std::string>;

inline std::vector<int> Vec(std::span<const int> s) { return {s.begin(), s.end()}; }

inline RingHost Host(int id, std::vector<int64_t> tokens, std::string dc = "dc1",
              std::string rack = "rack1") {
  RingHost h;
  h.id = id;
  h.datacenter = std::move(dc);
  h.rack = std::move(rack);
  h.tokens = std::move(tokens);
  return h;
}

inline TokenRing MustRing(std::vector<RingHost> hosts) {
  auto ring = TokenRing::Build(std::move(hosts));
  EXPECT_TRUE(ring.ok()) << ring.status().ToString();
  return std::move(ring).value();
}

inline ReplicaMap MustMap(const TokenRing& ring, const Replication& replication) {
  auto map = ReplicaMap::Build(ring, replication);
  EXPECT_TRUE(map.ok()) << map.status().ToString();
  return std::move(map).value();
}

inline Replication Simple(int rf) {
  return {{"class", "org.apache.cassandra.locator.SimpleStrategy"},
          {"replication_factor", std::to_string(rf)}};
}

}  // namespace cqlstream::routing::testing

#endif  // CQLSTREAM_NET_ROUTING_TOKEN_RING_TEST_UTIL_H_
