// Copyright (c) cqlstream authors.
//
// Load balancing: which hosts a request tries, in which order (its query
// plan), as a small policy object beside the retry and speculative ones
// (net/policies.h), in the manner of scylla-rust-driver's
// LoadBalancingPolicy: the session asks the policy for one plan per request
// and walks it (a host without an open connection is skipped, retries and
// hedges take the next host of the same plan).
//
// DefaultLoadBalancingPolicy, the session's plan:
//  1. a request for one host (target_host): that host only, no failover;
//  2. the up replicas of the request's token in the local data center, least
//     busy first (ties kept in ring order);
//  3. the other up hosts of the local data center, round-robin;
//  4. up hosts of remote data centers; 5. hosts seen down;
//  then the replicas of step 2 are rotated by the request's plan_offset (the
//  whole plan when there are none): a hedge or retry goes first to another
//  replica, or stays on the only one, rather than to a host that would
//  only forward the read to the same replicas. (The hosts after the
//  replicas stay in the plan as failover. On the only replica the hedge
//  takes that host's least busy connection, which can be the slow
//  attempt's own: the loader's hedge does not know its connection.)
// Without a token (or a keyspace whose replicas cannot be placed) the plan
// starts at step 3.
//
// Thread-safety: policies are shared by all requests of a session and are
// thread-safe (the default policy's only state is an atomic round-robin
// counter). ClusterView is a borrowed view for one call.
#ifndef CQLSTREAM_NET_LOAD_BALANCING_H_
#define CQLSTREAM_NET_LOAD_BALANCING_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/topology.h"

namespace cqlstream::net {

// What a plan depends on of one request.
struct RoutingInfo {
  std::optional<int64_t> token;  // of the partition key, when known
  std::string keyspace;          // whose replication places the token
  std::string target_host;       // address or endpoint: that host only
  int plan_offset = 0;           // turn the replicas by n (the whole plan without replicas)
};

// The cluster as a policy sees it for one call; borrowed from the session.
struct ClusterView {
  const std::vector<HostPtr>& hosts;  // every known host
  std::string_view local_dc;          // empty: every host counts as local
  // Replicas of `token` in `keyspace`, in placement order (empty: unknown).
  std::function<std::vector<HostPtr>(const std::string& keyspace, int64_t token)> replicas;
};

class LoadBalancingPolicy {
 public:
  virtual ~LoadBalancingPolicy() = default;
  // The hosts to try for one request, best first; empty when none fits.
  virtual std::vector<HostPtr> Plan(const RoutingInfo& request, const ClusterView& cluster) const = 0;
};

class DefaultLoadBalancingPolicy final : public LoadBalancingPolicy {
 public:
  std::vector<HostPtr> Plan(const RoutingInfo& request, const ClusterView& cluster) const override;

 private:
  mutable std::atomic<uint64_t> round_robin_{0};
};

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_LOAD_BALANCING_H_
