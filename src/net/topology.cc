// Copyright (c) cqlstream authors.
#include "net/topology.h"

#include <fmt/format.h>

#include "net/routing/token_ring.h"
#include "util/mix.h"

namespace cqlstream::net {

std::string Host::endpoint() const {
  if (address.find(':') != std::string::npos) return fmt::format("[{}]:{}", address, port);
  return fmt::format("{}:{}", address, port);
}

struct ReplicaIndex::Rep {
  std::vector<HostPtr> hosts;  // indexed by RingHost::id
  routing::ReplicaMap map;
};

std::shared_ptr<const ReplicaIndex> ReplicaIndex::Build(const std::vector<HostPtr>& hosts,
                                                        const std::map<std::string, std::string>& replication) {
  std::vector<routing::RingHost> ring_hosts;
  bool any_tokens = false;
  for (size_t i = 0; i < hosts.size(); ++i) {
    ring_hosts.push_back(routing::RingHost{static_cast<int>(i), hosts[i]->datacenter, hosts[i]->rack,
                                           hosts[i]->tokens});
    any_tokens = any_tokens || !hosts[i]->tokens.empty();
  }
  if (!any_tokens) return nullptr;
  auto ring = routing::TokenRing::Build(std::move(ring_hosts));
  if (!ring.ok()) return nullptr;
  auto map = routing::ReplicaMap::Build(*ring, replication);
  if (!map.ok()) return nullptr;  // e.g. a strategy we cannot place: round-robin instead
  auto rep = std::make_shared<const Rep>(Rep{hosts, std::move(*map)});
  return std::make_shared<const ReplicaIndex>(std::move(rep));
}

std::vector<HostPtr> ReplicaIndex::Replicas(int64_t token) const {
  std::vector<HostPtr> out;
  for (int id : rep_->map.Replicas(token)) {
    if (id >= 0 && static_cast<size_t>(id) < rep_->hosts.size()) out.push_back(rep_->hosts[static_cast<size_t>(id)]);
  }
  return out;
}

uint64_t ReplicaIndex::ReplicaSet(int64_t token, std::string_view dc) const {
  // A sum of mixed ids (spread over 64 bits first) does not depend on the
  // replicas' order.
  uint64_t all = 0, in_dc = 0;
  for (int id : rep_->map.Replicas(token)) {
    if (id < 0 || static_cast<size_t>(id) >= rep_->hosts.size()) continue;
    const uint64_t m = SplitMix64(static_cast<uint64_t>(id));
    all += m;
    if (!dc.empty() && rep_->hosts[static_cast<size_t>(id)]->datacenter == dc) in_dc += m;
  }
  return in_dc != 0 ? in_dc : all;
}

}  // namespace cqlstream::net
