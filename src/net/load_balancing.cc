// Copyright (c) cqlstream authors.
#include "net/load_balancing.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>

namespace cqlstream::net {

namespace {

bool InDc(const Host& h, std::string_view dc) { return dc.empty() || h.datacenter == dc; }

// The up replicas of the local DC, least busy first; ties keep the ring order
// so that load spreads deterministically.
std::vector<HostPtr> LocalReplicas(const std::vector<HostPtr>& replicas, std::string_view dc) {
  std::vector<std::pair<int, HostPtr>> by_load;
  for (const auto& h : replicas) {
    if (h->up() && InDc(*h, dc)) by_load.emplace_back(h->InFlight(), h);
  }
  std::stable_sort(by_load.begin(), by_load.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<HostPtr> out;
  out.reserve(by_load.size());
  for (auto& [load, h] : by_load) out.push_back(std::move(h));
  return out;
}

}  // namespace

std::vector<HostPtr> DefaultLoadBalancingPolicy::Plan(const RoutingInfo& request, const ClusterView& cluster) const {
  std::vector<HostPtr> plan;
  const std::vector<HostPtr>& hosts = cluster.hosts;
  if (hosts.empty()) return plan;
  if (!request.target_host.empty()) {
    for (const auto& h : hosts) {
      if (h->address == request.target_host || h->endpoint() == request.target_host) plan.push_back(h);
    }
    return plan;
  }
  if (request.token && !request.keyspace.empty() && cluster.replicas) {
    plan = LocalReplicas(cluster.replicas(request.keyspace, *request.token), cluster.local_dc);
  }
  const size_t replicas = plan.size();
  // By endpoint, not by object: the replicas may come from a newer topology
  // snapshot than `hosts`, whose changed hosts are other objects. Endpoints
  // are compared, not formatted: this runs for every request (a set of
  // formatted endpoint strings here cost about four formats per host and a
  // set node per host, per request; bench/micro/plan_micro.cc). Each host is
  // looked at once (its up state read once: it may change meanwhile), and
  // only the replicas are skipped (BuildTopology and refreshes keep each
  // endpoint one host's: Topology::hosts).
  const auto is_replica = [&plan, replicas](const Host& h) {
    return std::any_of(plan.begin(), plan.begin() + static_cast<std::ptrdiff_t>(replicas),
                       [&h](const HostPtr& r) { return SameEndpoint(*r, h); });
  };
  // Other up hosts of the local DC round-robin, then remote DCs, then down
  // hosts (the last two kept aside: none in a one-DC cluster that is up).
  const size_t n = hosts.size();
  plan.reserve(replicas + n);
  std::vector<HostPtr> remote, down;
  const size_t start = static_cast<size_t>(round_robin_.fetch_add(1, std::memory_order_relaxed) % n);
  for (size_t k = 0; k < n; ++k) {
    const HostPtr& h = hosts[(start + k) % n];
    if (is_replica(*h)) continue;
    if (!h->up()) {
      down.push_back(h);
    } else if (InDc(*h, cluster.local_dc)) {
      plan.push_back(h);
    } else {
      remote.push_back(h);
    }
  }
  plan.insert(plan.end(), remote.begin(), remote.end());
  plan.insert(plan.end(), down.begin(), down.end());
  // The offset turns the replicas when there are any: a hedge or retry of a
  // read sent to a host that does not hold the data is coordinated there
  // and read from the same replicas, a hop longer, so it cannot be faster
  // (with one local replica, as at RF 1, it stays on that replica, on
  // whichever of its connections is least busy). Without replicas it turns
  // the whole plan.
  const size_t turned = replicas > 0 ? replicas : plan.size();
  if (request.plan_offset > 0 && turned > 1) {
    const size_t offset = static_cast<size_t>(request.plan_offset) % turned;
    std::rotate(plan.begin(), plan.begin() + static_cast<long>(offset), plan.begin() + static_cast<long>(turned));
  }
  return plan;
}

}  // namespace cqlstream::net
