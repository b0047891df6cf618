// Copyright (c) cqlstream authors.
//
// ReplicaIndex on hand-made rings (no connections): the replicas of a token
// and the id of their set (ReplicaSet), which the loader groups coalesced
// reads by.
#include "net/topology.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace cqlstream::net {
namespace {

HostPtr MakeTokenHost(const std::string& address, const std::string& dc, std::vector<int64_t> tokens) {
  auto h = std::make_shared<Host>();
  h->address = address;
  h->datacenter = dc;
  h->tokens = std::move(tokens);
  return h;
}

std::set<std::string> Addresses(const std::vector<HostPtr>& hosts) {
  std::set<std::string> out;
  for (const auto& h : hosts) out.insert(h->address);
  return out;
}

// Tokens 100, 200, ... 600 owned in turn by .1 .2 .3 .1 .2 .3: range i is
// (t_{i-1}, t_i]; with RF 2 (SimpleStrategy) its replicas are its owner and
// the next host clockwise.
std::vector<HostPtr> SixRanges() {
  return {MakeTokenHost("10.0.0.1", "dc1", {100, 400}), MakeTokenHost("10.0.0.2", "dc1", {200, 500}),
          MakeTokenHost("10.0.0.3", "dc1", {300, 600})};
}

TEST(ReplicaIndexTest, TokensOnTheSameReplicasShareASetIdAndOthersDoNot) {
  auto index = ReplicaIndex::Build(SixRanges(), {{"class", "SimpleStrategy"}, {"replication_factor", "2"}});
  ASSERT_NE(index, nullptr);
  // Six ranges, three replica sets ({.1,.2} {.2,.3} {.3,.1}), each of two
  // ranges (and the wrapping range, past 600, is {.1,.2} again).
  std::map<std::set<std::string>, std::set<uint64_t>> ids_by_set;
  std::map<uint64_t, std::set<std::string>> set_by_id;
  for (int64_t token : {50, 150, 250, 350, 450, 550, 650, 99, 101, 199, 201}) {
    const auto replicas = Addresses(index->Replicas(token));
    ASSERT_EQ(replicas.size(), 2u) << token;
    const uint64_t id = index->ReplicaSet(token, "dc1");
    EXPECT_NE(id, 0u) << token;
    ids_by_set[replicas].insert(id);
    auto [it, fresh] = set_by_id.emplace(id, replicas);
    EXPECT_EQ(it->second, replicas) << "one id for two replica sets, token " << token;
  }
  ASSERT_EQ(ids_by_set.size(), 3u);  // {.1,.2} {.2,.3} {.3,.1}
  for (const auto& [replicas, ids] : ids_by_set) EXPECT_EQ(ids.size(), 1u) << "one set with several ids";
  // No data center, or one that holds none of the replicas: the whole set.
  EXPECT_EQ(index->ReplicaSet(50, ""), index->ReplicaSet(50, "dc1"));
  EXPECT_EQ(index->ReplicaSet(50, "elsewhere"), index->ReplicaSet(50, "dc1"));
}

TEST(ReplicaIndexTest, TheOrderOfTheReplicasDoesNotChangeTheId) {
  // .1 owns 100 and 300, .2 owns 200 and 400; RF 2: (0,100] has .1 then .2,
  // (100,200] .2 then .1.
  std::vector<HostPtr> hosts{MakeTokenHost("10.0.0.1", "dc1", {100, 300}),
                             MakeTokenHost("10.0.0.2", "dc1", {200, 400})};
  auto index = ReplicaIndex::Build(hosts, {{"class", "SimpleStrategy"}, {"replication_factor", "2"}});
  ASSERT_NE(index, nullptr);
  ASSERT_EQ(index->Replicas(50).front()->address, "10.0.0.1");
  ASSERT_EQ(index->Replicas(150).front()->address, "10.0.0.2");
  EXPECT_EQ(index->ReplicaSet(50, "dc1"), index->ReplicaSet(150, "dc1"));
  // RF 1: the two owners are two sets.
  auto rf1 = ReplicaIndex::Build(hosts, {{"class", "SimpleStrategy"}, {"replication_factor", "1"}});
  ASSERT_NE(rf1, nullptr);
  EXPECT_NE(rf1->ReplicaSet(50, "dc1"), rf1->ReplicaSet(150, "dc1"));
  EXPECT_EQ(rf1->ReplicaSet(50, "dc1"), rf1->ReplicaSet(250, "dc1"));
}

TEST(ReplicaIndexTest, TheSetIsTheLocalDataCentersReplicas) {
  // dc1: .1 .2; dc2: .3 .4; one replica per DC.
  std::vector<HostPtr> hosts{MakeTokenHost("10.0.0.1", "dc1", {100}), MakeTokenHost("10.0.0.3", "dc2", {200}),
                             MakeTokenHost("10.0.0.2", "dc1", {300}), MakeTokenHost("10.0.0.4", "dc2", {400})};
  auto index = ReplicaIndex::Build(hosts, {{"class", "NetworkTopologyStrategy"}, {"dc1", "1"}, {"dc2", "1"}});
  ASSERT_NE(index, nullptr);
  // Tokens with the same dc1 replica (50 and 350: .1; 150 and 250: .2)
  // share an id in dc1, whatever their dc2 replica.
  for (int64_t a : {50, 150, 250, 350}) {
    for (int64_t b : {50, 150, 250, 350}) {
      std::set<std::string> ra, rb;
      for (const auto& h : index->Replicas(a)) {
        if (h->datacenter == "dc1") ra.insert(h->address);
      }
      for (const auto& h : index->Replicas(b)) {
        if (h->datacenter == "dc1") rb.insert(h->address);
      }
      EXPECT_EQ(index->ReplicaSet(a, "dc1") == index->ReplicaSet(b, "dc1"), ra == rb) << a << " " << b;
    }
  }
  // Seen from dc2, the same tokens group by their dc2 replica instead.
  EXPECT_NE(index->ReplicaSet(50, "dc2"), index->ReplicaSet(50, "dc1"));
}

TEST(ReplicaIndexTest, AStrategyWithoutReplicasHasNoSet) {
  auto index = ReplicaIndex::Build(SixRanges(), {{"class", "LocalStrategy"}});
  ASSERT_NE(index, nullptr);
  EXPECT_TRUE(index->Replicas(50).empty());
  EXPECT_EQ(index->ReplicaSet(50, "dc1"), 0u);
}

}  // namespace
}  // namespace cqlstream::net
