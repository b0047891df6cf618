// Copyright (c) cqlstream authors.
//
// The session's view of the cluster: hosts (with their connection pools,
// net/pool.h) and the per-keyspace replica index used for token-aware
// routing. Built from system.local / system.peers(_v2) and
// system_schema.keyspaces by the control connection (net/control.h).
//
// Thread-safety: a Topology is immutable once published (the session swaps
// whole snapshots). Host fields other than `pool` are written only before
// publication or under the session's topology lock; the pool is set before
// publication and is thread-safe itself. ReplicaIndex is an immutable value.
#ifndef CQLSTREAM_NET_TOPOLOGY_H_
#define CQLSTREAM_NET_TOPOLOGY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cqlstream/status.h"
#include "net/pool.h"

namespace cqlstream::net {

struct Host {
  std::string address;  // as the client connects to it
  uint16_t port = 9042;
  // The endpoint its system.peers row announces ("address:port"); empty for
  // the control connection's host, listed under the address it was reached
  // by. A refresh that keeps a host's pool keeps `address` and `port` and
  // takes this from the new row: a change here is a node that moved.
  std::string announced;
  std::string datacenter, rack, release_version, host_id, schema_version;
  std::vector<int64_t> tokens;  // sorted
  // Its connections; set when the session adopts the host (ApplyTopology),
  // before the topology is published.
  std::shared_ptr<HostPool> pool;

  // Whether the host is up (see HostPool::up); true before it has a pool.
  bool up() const { return !pool || pool->up(); }
  // Requests in flight to the host.
  int InFlight() const { return pool ? pool->InFlight() : 0; }
  // "address:port" ("[address]:port" for IPv6), formatted on each call.
  std::string endpoint() const;
};
using HostPtr = std::shared_ptr<Host>;

// Whether `a` and `b` name one endpoint (what endpoint() prints), without
// formatting it: request plans compare hosts this way.
inline bool SameEndpoint(const Host& a, const Host& b) {
  return &a == &b || (a.port == b.port && a.address == b.address);
}

struct Topology {
  std::string cluster_name;
  // hosts[0]: the control connection's host. Each endpoint is one host's:
  // BuildTopology lists each once, and a refresh (the session's
  // ApplyTopology) keeps the address a host was known by where it differs
  // from the one its row is listed at (the control connection's host is
  // listed under the address it was reached by) only while no other row is
  // listed there.
  std::vector<HostPtr> hosts;
  std::map<std::string, std::map<std::string, std::string>> replication;  // keyspace -> options
  int ignored_peers = 0;  // system.peers rows naming a host already listed (BuildTopology)
};

// Replicas of each token range for one keyspace.
class ReplicaIndex {
 public:
  // nullptr when the keyspace cannot be routed (no tokens, unknown strategy).
  static std::shared_ptr<const ReplicaIndex> Build(const std::vector<HostPtr>& hosts,
                                                   const std::map<std::string, std::string>& replication);
  // Replicas of `token` in placement order.
  std::vector<HostPtr> Replicas(int64_t token) const;
  // An id of the set of `token`'s replicas in data center `dc` (all its
  // replicas when `dc` is empty or holds none of them): tokens with the same
  // set get the same id, whatever the order of their replicas; 0 when the
  // token has no replica. Two different sets may share an id only by a
  // 64-bit hash collision. No allocation.
  uint64_t ReplicaSet(int64_t token, std::string_view dc) const;

  struct Rep;
  explicit ReplicaIndex(std::shared_ptr<const Rep> rep) : rep_(std::move(rep)) {}

 private:
  std::shared_ptr<const Rep> rep_;
};

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_TOPOLOGY_H_
