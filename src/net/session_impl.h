// Copyright (c) cqlstream authors.
//
// Session::Impl: the state one session shares between its parts, private to
// src/net. It owns the I/O threads, the control connection (net/control.h),
// the published topology with one HostPool per host (net/pool.h), the
// prepared-statement cache, the policies and the counters; it serves the
// pools and the control connection as their owner (PoolOwner,
// ControlOwner), and turns a statement into a query plan through the
// load-balancing policy (net/load_balancing.h). Executions
// (net/execution.h) hold it while they run.
//
// Thread-safety: every method is thread-safe; the topology is an immutable
// snapshot swapped under topo_mu, the prepared cache is under prepared_mu,
// counters are atomics. No lock is held while calling into a pool or the
// control connection.
// Ownership: shared (std::shared_ptr) by the Session, executions and timers;
// pools and the control connection hold it weakly.
#ifndef CQLSTREAM_NET_SESSION_IMPL_H_
#define CQLSTREAM_NET_SESSION_IMPL_H_

#include <asio.hpp>
#include <atomic>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "net/connection_registry.h"
#include "net/control.h"
#include "net/io_pool.h"
#include "net/load_balancing.h"
#include "net/pool.h"
#include "net/session.h"
#include "net/topology.h"
#include "util/mutex.h"

namespace cqlstream::net {

struct Session::Impl final : PoolOwner, ControlOwner, std::enable_shared_from_this<Session::Impl> {
  ConnectionOptions opts;
  SessionOptions sopts;
  std::unique_ptr<IoPool> io;
  std::shared_ptr<asio::ssl::context> tls;
  std::shared_ptr<ControlConnection> control;  // set by Connect before any I/O
  // Every connection opened for the session (ConnectionOptionsFor), so that
  // Shutdown closes those still in their handshake, which nothing else holds.
  std::shared_ptr<ConnectionRegistry> connections = std::make_shared<ConnectionRegistry>();

  mutable Mutex topo_mu;
  std::shared_ptr<const Topology> topo GUARDED_BY(topo_mu);
  std::map<std::string, std::shared_ptr<const ReplicaIndex>> rings GUARDED_BY(topo_mu);
  std::string local_dc GUARDED_BY(topo_mu);

  Mutex prepared_mu;
  std::unordered_map<std::string, PreparedPtr> prepared GUARDED_BY(prepared_mu);
  // The prepared statement of `query` from a PREPARED answer, kept in the
  // cache (a newer preparation replaces the old one).
  PreparedPtr RememberPrepared(const std::string& query, const cql::Prepared& p) EXCLUDES(prepared_mu);

  // SessionOptions::stop, replaced by SetStop.
  mutable Mutex stop_mu;
  std::shared_ptr<const std::atomic<bool>> stop GUARDED_BY(stop_mu);
  std::shared_ptr<const std::atomic<bool>> Stop() const EXCLUDES(stop_mu) {
    MutexLock l(&stop_mu);
    return stop;
  }

  std::atomic<bool> is_closed{false};
  std::atomic<int> conns_per_host{1};
  // ConnectionBudget() at the last SetTotalConnections (net/fd_budget.h).
  std::atomic<int> connection_budget{std::numeric_limits<int>::max()};
  LatencyTracker latencies;
  std::atomic<uint64_t> latency_samples{0};
  std::atomic<bool> plaintext_warned{false};

  struct Counters {
    std::atomic<uint64_t> requests{0}, executions{0}, retries{0}, hedges{0}, hedge_wins{0}, timeouts{0},
        errors{0}, reprepares{0}, reconnects{0}, columns_decoded{0};
  } counters;
  // Bytes of connections that were closed (live ones are summed on demand).
  std::atomic<uint64_t> closed_bytes_read{0}, closed_bytes_written{0}, closed_direct{0}, closed_copied{0};

  // --- PoolOwner and ControlOwner ------------------------------------------
  bool closed() const override { return is_closed.load(); }
  asio::io_context& NextIo() override { return io->Next(); }
  Connection::Options ConnectionOptionsFor(const std::string& address, uint16_t port) override;
  int ConnectionsPerHost() const override { return conns_per_host.load(std::memory_order_relaxed); }
  void OnConnectionClosed(const Connection& c) override;
  void OnPoolUp() override { counters.reconnects++; }
  std::shared_ptr<const Topology> Topo() const override;
  void ApplyTopology(std::shared_ptr<Topology> t) override;

  // The one reconnection policy of pools and the control connection.
  ExponentialBackoff ReconnectBackoff() const { return ExponentialBackoff(opts.reconnect_base, opts.reconnect_max); }
  PoolConfig MakePoolConfig() const;
  ControlConfig MakeControlConfig() const;

  std::string LocalDc() const;
  // Replicas of `token` in `keyspace` among the hosts of `topology` (cached
  // per keyspace while `topology` is the published one).
  std::vector<HostPtr> Replicas(const std::shared_ptr<const Topology>& topology, const std::string& keyspace,
                                int64_t token);
  // Session::ReplicaSetOf on the published topology.
  uint64_t ReplicaSetOf(const std::string& keyspace, int64_t token);
  // The statement's plan from the load-balancing policy; its token in `token`.
  std::vector<HostPtr> QueryPlan(const Statement& st, std::optional<int64_t>* token);

  // Warns once (stderr) when credentials go over plaintext to a host that is
  // not a loopback address.
  void WarnPlaintextCredentials();
  // Fails what is pending with Cancelled (closing every connection, those
  // still in their handshake too: `connections`) and stops the I/O threads.
  void Shutdown();

 private:
  std::shared_ptr<const ReplicaIndex> Ring(const std::shared_ptr<const Topology>& topology,
                                           const std::string& keyspace);
};

// The routing facts of a statement: the token of its bound partition key (a
// prepared statement) or of its routing key, its keyspace, target and offset.
RoutingInfo RoutingOf(const Statement& st);

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_SESSION_IMPL_H_
