// Copyright (c) cqlstream authors.
//
// The session's view of the cluster: hosts (with their connection pools),
// the per-keyspace replica index used for token-aware routing, and the
// ScyllaDB sharding of a host. Built from system.local / system.peers(_v2)
// and system_schema.keyspaces by the session.
//
// Thread-safety: a Topology is immutable once published (the session swaps
// whole snapshots). Host fields other than `up` and `pool` are written only
// before publication or under the session's topology lock; `up` is atomic;
// `pool` has its own mutex. ReplicaIndex and ShardInfo are immutable values.
#ifndef CQLSTREAM_NET_TOPOLOGY_H_
#define CQLSTREAM_NET_TOPOLOGY_H_

#include <asio.hpp>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cqlstream/status.h"
#include "net/connection.h"
#include "net/routing/sharding.h"
#include "util/mutex.h"

namespace cqlstream::net {

// ScyllaDB shard awareness of one host (from SUPPORTED).
using ShardInfo = routing::ShardingInfo;
// The shard-aware port for plain or TLS connections, if advertised.
std::optional<uint16_t> ShardAwarePort(const ShardInfo& info, bool tls);
// Up to `count` local source ports that the shard-aware port maps to
// `shard`, starting at a random place in the ephemeral range.
std::vector<uint16_t> ShardSourcePorts(const ShardInfo& info, int shard, int count);

struct HostPool {
  Mutex mu;
  std::vector<std::shared_ptr<Connection>> conns GUARDED_BY(mu);  // open connections
  std::vector<int> conn_shard GUARDED_BY(mu);                     // shard of conns[i] (-1: unknown)
  std::vector<bool> conn_aware GUARDED_BY(mu);                    // conns[i] came through the shard-aware port
  int opening GUARDED_BY(mu) = 0;
  std::vector<int> opening_by_shard GUARDED_BY(mu);               // shard-aware opens in progress
  int failures GUARDED_BY(mu) = 0;                                // consecutive failed opens
  bool reconnect_scheduled GUARDED_BY(mu) = false;
  bool closed GUARDED_BY(mu) = false;
  std::optional<ShardInfo> sharding GUARDED_BY(mu);
  std::unique_ptr<asio::steady_timer> timer GUARDED_BY(mu);
  std::string last_error GUARDED_BY(mu);

  // Requests in flight over the pool's connections.
  int InFlight();
};

struct Host {
  std::string address;  // as the client connects to it
  uint16_t port = 9042;
  std::string datacenter, rack, release_version, host_id, schema_version;
  std::vector<int64_t> tokens;  // sorted
  std::atomic<bool> up{true};
  HostPool pool;

  std::string endpoint() const;
};
using HostPtr = std::shared_ptr<Host>;

struct Topology {
  std::string cluster_name;
  std::vector<HostPtr> hosts;  // hosts[0]: the control connection's host
  std::map<std::string, std::map<std::string, std::string>> replication;  // keyspace -> options
};

// Replicas of each token range for one keyspace.
class ReplicaIndex {
 public:
  // nullptr when the keyspace cannot be routed (no tokens, unknown strategy).
  static std::shared_ptr<const ReplicaIndex> Build(const std::vector<HostPtr>& hosts,
                                                   const std::map<std::string, std::string>& replication);
  // Replicas of `token` in placement order.
  std::vector<HostPtr> Replicas(int64_t token) const;

  struct Rep;
  explicit ReplicaIndex(std::shared_ptr<const Rep> rep) : rep_(std::move(rep)) {}

 private:
  std::shared_ptr<const Rep> rep_;
};

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_TOPOLOGY_H_
