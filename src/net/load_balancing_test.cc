// Copyright (c) cqlstream authors.
//
// DefaultLoadBalancingPolicy on hand-made clusters (no connections): the
// plan's order (local replicas, other local hosts, remote DCs, down hosts),
// round-robin without a token, a target host, the plan offset.
#include "net/load_balancing.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace cqlstream::net {
namespace {

HostPtr MakeHost(const std::string& address, const std::string& dc, bool up = true) {
  auto h = std::make_shared<Host>();
  h->address = address;
  h->port = 9042;
  h->datacenter = dc;
  // A pool that never opens anything (no owner): it only carries up/down.
  h->pool = HostPool::Make(address, 9042, PoolConfig{}, {});
  if (!up) h->pool->MarkDown();
  return h;
}

std::vector<std::string> Addresses(const std::vector<HostPtr>& plan) {
  std::vector<std::string> out;
  for (const auto& h : plan) out.push_back(h->address);
  return out;
}

struct TwoDcs {
  // dc1: .1 .2 .3 (.3 down); dc2: .4 .5
  std::vector<HostPtr> hosts{MakeHost("10.0.0.1", "dc1"), MakeHost("10.0.0.2", "dc1"),
                             MakeHost("10.0.0.3", "dc1", /*up=*/false), MakeHost("10.0.0.4", "dc2"),
                             MakeHost("10.0.0.5", "dc2")};
  // The token's replicas: .2 (dc1), .4 (dc2), .3 (dc1, down).
  ClusterView View() const {
    return ClusterView{hosts, "dc1", [this](const std::string& ks, int64_t) {
                         if (ks != "ks") return std::vector<HostPtr>{};
                         return std::vector<HostPtr>{hosts[1], hosts[3], hosts[2]};
                       }};
  }
};

TEST(LoadBalancingTest, LocalReplicasThenLocalHostsThenRemoteThenDown) {
  TwoDcs c;
  DefaultLoadBalancingPolicy policy;
  RoutingInfo r;
  r.token = 42;
  r.keyspace = "ks";
  auto plan = Addresses(policy.Plan(r, c.View()));
  ASSERT_EQ(plan.size(), 5u);
  EXPECT_EQ(plan[0], "10.0.0.2");  // the up local replica
  EXPECT_EQ(plan[1], "10.0.0.1");  // the other up local host
  EXPECT_EQ(std::set<std::string>(plan.begin() + 2, plan.begin() + 4),
            (std::set<std::string>{"10.0.0.4", "10.0.0.5"}));  // remote DC
  EXPECT_EQ(plan[4], "10.0.0.3");  // down: last
}

TEST(LoadBalancingTest, WithoutATokenThePlanStartsRoundRobin) {
  TwoDcs c;
  DefaultLoadBalancingPolicy policy;
  std::set<std::string> firsts;
  for (int i = 0; i < 6; ++i) {
    auto plan = Addresses(policy.Plan(RoutingInfo{}, c.View()));
    ASSERT_EQ(plan.size(), 5u);
    firsts.insert(plan[0]);
    // Local up hosts first, the down one last, every host once.
    EXPECT_TRUE(plan[0] == "10.0.0.1" || plan[0] == "10.0.0.2") << plan[0];
    EXPECT_EQ(plan[4], "10.0.0.3");
    EXPECT_EQ(std::set<std::string>(plan.begin(), plan.end()).size(), 5u);
  }
  EXPECT_EQ(firsts, (std::set<std::string>{"10.0.0.1", "10.0.0.2"}));
}

TEST(LoadBalancingTest, AKeyspaceWithoutReplicasIsRoutedLikeNoToken) {
  TwoDcs c;
  DefaultLoadBalancingPolicy policy;
  RoutingInfo r;
  r.token = 42;
  r.keyspace = "other";
  auto plan = Addresses(policy.Plan(r, c.View()));
  ASSERT_EQ(plan.size(), 5u);
  EXPECT_TRUE(plan[0] == "10.0.0.1" || plan[0] == "10.0.0.2") << plan[0];
}

TEST(LoadBalancingTest, ATargetHostIsTheWholePlan) {
  TwoDcs c;
  DefaultLoadBalancingPolicy policy;
  RoutingInfo r;
  r.target_host = "10.0.0.4";
  EXPECT_EQ(Addresses(policy.Plan(r, c.View())), std::vector<std::string>{"10.0.0.4"});
  r.target_host = "10.0.0.5:9042";  // an endpoint works too
  EXPECT_EQ(Addresses(policy.Plan(r, c.View())), std::vector<std::string>{"10.0.0.5"});
  r.target_host = "10.9.9.9";
  EXPECT_TRUE(policy.Plan(r, c.View()).empty());
}

TEST(LoadBalancingTest, ThePlanOffsetTurnsTheReplicas) {
  // dc1: .1 .2 .3 up, the token's replicas .3 and .1; .2 holds nothing.
  std::vector<HostPtr> hosts{MakeHost("10.0.0.1", "dc1"), MakeHost("10.0.0.2", "dc1"), MakeHost("10.0.0.3", "dc1")};
  ClusterView view{hosts, "dc1", [&hosts](const std::string&, int64_t) {
                     return std::vector<HostPtr>{hosts[2], hosts[0]};
                   }};
  DefaultLoadBalancingPolicy policy;
  RoutingInfo r;
  r.token = 42;
  r.keyspace = "ks";
  auto base = Addresses(policy.Plan(r, view));
  ASSERT_EQ(base.size(), 3u);
  EXPECT_EQ(std::set<std::string>(base.begin(), base.begin() + 2), (std::set<std::string>{"10.0.0.1", "10.0.0.3"}));
  EXPECT_EQ(base[2], "10.0.0.2");
  r.plan_offset = 1;  // a hedge: the other replica first, the non-replica still last
  auto turned = Addresses(policy.Plan(r, view));
  EXPECT_EQ(turned, (std::vector<std::string>{base[1], base[0], "10.0.0.2"}));
  r.plan_offset = 2;  // wraps over the two replicas: the same as 0
  EXPECT_EQ(Addresses(policy.Plan(r, view)), base);
}

TEST(LoadBalancingTest, WithOneLocalReplicaAHedgeStaysOnIt) {
  // As at RF 1: the only local replica (.2) is the only host with the
  // data; any other would coordinate the read and fetch it from .2.
  TwoDcs c;
  DefaultLoadBalancingPolicy policy;
  RoutingInfo r;
  r.token = 42;
  r.keyspace = "ks";
  auto base = Addresses(policy.Plan(r, c.View()));
  for (int offset : {1, 2, 5}) {
    r.plan_offset = offset;
    auto plan = Addresses(policy.Plan(r, c.View()));
    ASSERT_EQ(plan.size(), base.size());
    EXPECT_EQ(plan[0], "10.0.0.2") << offset;
    EXPECT_EQ(plan.back(), "10.0.0.3") << offset;  // down: still last
  }
}

TEST(LoadBalancingTest, WithoutATokenThePlanOffsetTurnsTheWholePlan) {
  std::vector<HostPtr> hosts{MakeHost("10.0.0.1", "dc1"), MakeHost("10.0.0.2", "dc1"), MakeHost("10.0.0.3", "dc1")};
  ClusterView view{hosts, "dc1", nullptr};
  DefaultLoadBalancingPolicy policy;  // a fresh round-robin: .1, then .2, ...
  RoutingInfo r;                      // no token: no replicas
  EXPECT_EQ(Addresses(policy.Plan(r, view)), (std::vector<std::string>{"10.0.0.1", "10.0.0.2", "10.0.0.3"}));
  r.plan_offset = 1;  // round-robin from .2, turned by one
  EXPECT_EQ(Addresses(policy.Plan(r, view)), (std::vector<std::string>{"10.0.0.3", "10.0.0.1", "10.0.0.2"}));
}

TEST(LoadBalancingTest, AnEmptyClusterHasAnEmptyPlanAndNoDcMeansAllLocal) {
  DefaultLoadBalancingPolicy policy;
  std::vector<HostPtr> none;
  EXPECT_TRUE(policy.Plan(RoutingInfo{}, ClusterView{none, "", nullptr}).empty());
  std::vector<HostPtr> hosts{MakeHost("10.0.0.1", "a"), MakeHost("10.0.0.2", "b", false)};
  auto plan = Addresses(policy.Plan(RoutingInfo{}, ClusterView{hosts, "", nullptr}));
  EXPECT_EQ(plan, (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));
}

// The replicas may come from a newer topology snapshot than the hosts (a
// refresh between the two reads): a changed host is then another object for
// the same endpoint, and is still planned once.
TEST(LoadBalancingTest, AReplicaFromANewerSnapshotIsPlannedOnce) {
  std::vector<HostPtr> hosts{MakeHost("10.0.0.1", "dc1"), MakeHost("10.0.0.2", "dc1")};
  HostPtr newer = MakeHost("10.0.0.2", "dc1");
  ClusterView view{hosts, "dc1", [newer](const std::string&, int64_t) { return std::vector<HostPtr>{newer}; }};
  DefaultLoadBalancingPolicy policy;
  RoutingInfo r;
  r.token = 7;
  r.keyspace = "ks";
  EXPECT_EQ(Addresses(policy.Plan(r, view)), (std::vector<std::string>{"10.0.0.2", "10.0.0.1"}));
}

TEST(LoadBalancingTest, AHostOnAReplicasAddressAtAnotherPortIsAnotherHost) {
  std::vector<HostPtr> hosts{MakeHost("10.0.0.2", "dc1"), MakeHost("10.0.0.2", "dc1")};
  hosts[1]->port = 19042;
  HostPtr newer = MakeHost("10.0.0.2", "dc1");  // hosts[0] in a newer snapshot
  ClusterView view{hosts, "dc1", [newer](const std::string&, int64_t) { return std::vector<HostPtr>{newer}; }};
  DefaultLoadBalancingPolicy policy;
  RoutingInfo r;
  r.token = 7;
  r.keyspace = "ks";
  for (int i = 0; i < 2; ++i) {  // whichever host round-robin starts from
    const auto plan = policy.Plan(r, view);
    ASSERT_EQ(plan.size(), 2u);
    EXPECT_EQ(plan[0], newer);
    EXPECT_EQ(plan[1], hosts[1]);
  }
}

}  // namespace
}  // namespace cqlstream::net
