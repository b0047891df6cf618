// Copyright (c) cqlstream authors.
//
// HostPool: the connections a session keeps to one host.
//
//  * Fill() opens connections until the pool has the wanted number (the
//    owner's ConnectionsPerHost()). On ScyllaDB, once the first connection's
//    SUPPORTED names the shards, the pool keeps at least one connection per
//    shard (of at most PoolConfig::max_shard_connections shards, or of the
//    wanted number when more; no more than that many in all, wherever the
//    node says they landed), opened through the shard-aware port with a
//    source port the server maps to that shard (connections that landed on
//    a shard by chance through the regular port stay in use but do not
//    count).
//  * Growth is immediate (Fill() after the owner raises the number).
//    Shrinking is at once for the requests and late for the sockets: a
//    surplus over the wanted number (Fill() after the owner lowers it) is
//    parked at once — Pick() hands out the oldest `wanted` connections, and
//    a parked one only when none of those can take the request (closed, or
//    the request avoids them) — so that an owner measuring whether fewer
//    connections do as well (loader/window.h) measures fewer. Parked
//    connections stay open until each has been parked for
//    PoolConfig::idle_close (a connection back in use forgets its wait), so
//    a number that falls and rises again costs no reopening. Then they are
//    retired: Pick() no longer hands them out at all, and each is closed
//    once its requests in flight have completed (checked every
//    kRetireCheck), so a shrink never fails a request. A ScyllaDB pool on
//    the shard-aware port is not shrunk (its connections are spread over
//    the shards).
//  * A connection that closes leaves the pool; a failed open of a pool
//    without connections counts as a failure, and the pool reopens after
//    the owner's reconnection backoff (ExponentialBackoff, jittered) for
//    failures + 1. A failed open of a pool that has connections means the
//    host takes no more from us (Cassandra's
//    native_transport_max_connections_per_ip, or our descriptors): the pool
//    stops growing at what it has and opens (growth_limit()); a connection
//    that closes below it is reopened, and the limit is forgotten when the
//    pool goes down. The refusal may also have been transient (a connect
//    time-out under load, descriptors freed since), so after
//    PoolConfig::growth_retry (backoff per refusal in a row) the pool probes
//    with one connection more than the limit: when it opens, the limit is
//    lifted and the pool grows to the wanted number; when it is refused, the
//    limit stays and the next probe waits longer. A pool with no open
//    connection is down (up() false: query plans try it last) and remembers
//    why (last_error(): the refused connect, or why its last connection
//    closed), so that "no open connection" names the cause.
//  * Close() closes the connections and stops reopening for good.
//
// Thread-safety: every method is thread-safe; the pool's state is under its
// own mutex, which is never held while calling out (Connection::Open/Close,
// the owner), but for the owner's ConnectionsPerHost(), an atomic read
// (a number read before the lock could undo a later one's parking).
// Connection callbacks run on the owner's I/O threads.
// Ownership: pools are shared (std::shared_ptr, held by their Host); their
// callbacks hold the pool and reach the owner through a weak_ptr, so a pool
// outliving its session does nothing.
#ifndef CQLSTREAM_NET_POOL_H_
#define CQLSTREAM_NET_POOL_H_

#include <asio.hpp>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cqlstream/status.h"
#include "net/connection.h"
#include "net/policies.h"
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

// What the pools of one session share with it. Implemented by the session;
// called from any thread, without the pool's lock held (but for
// ConnectionsPerHost()).
class PoolOwner {
 public:
  virtual ~PoolOwner() = default;
  virtual bool closed() const = 0;
  virtual asio::io_context& NextIo() = 0;
  // The options of a new connection to address:port (on_close is the pool's).
  virtual Connection::Options ConnectionOptionsFor(const std::string& address, uint16_t port) = 0;
  // Called under the pool's lock: must not block (an atomic read).
  virtual int ConnectionsPerHost() const = 0;
  // The connection is gone: its byte counts move into the session's totals.
  virtual void OnConnectionClosed(const Connection& connection) = 0;
  // A pool that was down has an open connection again.
  virtual void OnPoolUp() = 0;
};

struct PoolConfig {
  bool tls = false;            // selects the TLS shard-aware port
  bool shard_aware = true;     // use the shard-aware port when advertised
  ExponentialBackoff reconnect{std::chrono::milliseconds(100), std::chrono::milliseconds(10000)};
  // Before probing past a growth limit, per refusal in a row (see above).
  ExponentialBackoff growth_retry{std::chrono::milliseconds(2000), std::chrono::milliseconds(60000)};
  // How long a connection beyond the wanted number stays parked before it
  // is closed (see above); zero or less: a surplus is neither parked nor
  // closed.
  std::chrono::milliseconds idle_close{30000};
  // A shard-aware pool opens a connection for each of at most this many
  // shards (or of the wanted number of connections, when more): the shard
  // count is what the node's SUPPORTED answer claims (up to 65535), not a
  // number to open connections by. The other shards' tokens go to any
  // connection (Pick prefers the token's shard, then the least loaded).
  int max_shard_connections = 256;
};

class HostPool : public std::enable_shared_from_this<HostPool> {
 public:
  static std::shared_ptr<HostPool> Make(std::string address, uint16_t port, PoolConfig config,
                                        std::weak_ptr<PoolOwner> owner);

  // Opens the missing connections (in the background).
  void Fill();
  // Closes the connections with `why` and stops reopening.
  void Close(const Status& why);
  // The connection for a request: not already used by it (`avoid`), then
  // not parked (a surplus over the wanted number, see above), then on the
  // token's shard, then the least loaded; nullptr when none is open. With
  // more than kExactPickUpTo connections in use and no shard to match, the
  // less loaded of two in use picked at random instead (a full scan only
  // when neither can take the request); called on an I/O thread, the two
  // are drawn among the connections that thread serves (up to kLocalDraws
  // draws), unless one of another thread met on the way has fewer requests
  // by more than max(kLocalSlack, a quarter of the local one's).
  std::shared_ptr<Connection> Pick(std::optional<int64_t> token, const std::vector<const Connection*>& avoid);
  static constexpr size_t kExactPickUpTo = 16;
  static constexpr int kLocalDraws = 4;
  static constexpr int kLocalSlack = 2;

  // Where it connects (fixed at Make).
  const std::string& address() const { return address_; }
  uint16_t port() const { return port_; }

  // Up: has (or had at its last open) a connection. MarkDown(): the cluster
  // says the host is down; plans try it last until a connection opens again.
  bool up() const { return up_.load(std::memory_order_relaxed); }
  // Whether Close() was called.
  bool closed() const;
  // Whether a surplus over the wanted number is parked and closed (see
  // above): not on a shard-aware ScyllaDB pool, nor with idle_close <= 0.
  bool Shrinks() const { return shrinks_.load(std::memory_order_relaxed); }
  // The connections the host accepted before refusing one; 0: none refused.
  int growth_limit() const { return growth_limit_.load(std::memory_order_relaxed); }
  void MarkDown() { up_.store(false, std::memory_order_relaxed); }

  struct State {
    int open_connections = 0;
    int in_flight = 0;
    int shards = 0;          // ScyllaDB: shard count; 0 on Cassandra
    int growth_limit = 0;    // see growth_limit()
    std::string last_error;  // why the last open failed or connection closed
  };
  State state() const;
  // Requests in flight over the pool's connections (retired ones included);
  // a counter the connections keep, not a scan of them.
  int InFlight() const;
  std::string last_error() const;
  // Calls `f` for every open connection, retired ones included (under the
  // pool's lock: f must not call back into the pool).
  void ForEachConnection(const std::function<void(const Connection&)>& f) const;

  HostPool(std::string address, uint16_t port, PoolConfig config, std::weak_ptr<PoolOwner> owner);

  // How often retired connections are checked for requests in flight.
  static constexpr std::chrono::milliseconds kRetireCheck{100};

 private:
  struct ToOpen {
    int shard;                     // -1: any (regular port)
    std::vector<uint16_t> source_ports;
  };
  std::vector<ToOpen> Missing(uint16_t* port, int wanted) REQUIRES(mu_);
  void OnOpened(const std::shared_ptr<PoolOwner>& owner, StatusOr<std::shared_ptr<Connection>> c, int wanted_shard);
  void OnConnectionClosed(const std::shared_ptr<PoolOwner>& owner, const Status& why);
  void ScheduleReconnect(PoolOwner& owner);
  void ScheduleGrowthProbe(PoolOwner& owner);
  // Shrinking (see above): parks the connections beyond `wanted` (in_use_,
  // each with the time it was parked) and un-parks those within it; true
  // when a trim is pending (a parked connection, or retired ones not yet
  // closed).
  bool NoteSurplus(int wanted) REQUIRES(mu_);
  bool ShrinksLocked() const REQUIRES(mu_);
  uint64_t NextRandom() REQUIRES(mu_);
  // Removes conns_[i] and its entries in the parallel vectors.
  void EraseConnection(size_t i) REQUIRES(mu_);
  // The earliest time a connection now parked was parked.
  std::optional<std::chrono::steady_clock::time_point> FirstParked() const REQUIRES(mu_);
  void ScheduleTrim(PoolOwner& owner);
  void Trim();

  const std::string address_;
  const uint16_t port_;
  const PoolConfig config_;
  const std::weak_ptr<PoolOwner> owner_;
  std::atomic<bool> up_{true};
  std::atomic<int> growth_limit_{0};
  std::atomic<bool> shrinks_{config_.idle_close.count() > 0};  // Shrinks(): set again once the sharding is known

  mutable Mutex mu_;
  std::vector<std::shared_ptr<Connection>> conns_ GUARDED_BY(mu_);  // open connections
  std::vector<int> conn_shard_ GUARDED_BY(mu_);                     // shard of conns_[i] (-1: unknown)
  std::vector<bool> conn_aware_ GUARDED_BY(mu_);                    // conns_[i] came through the shard-aware port
  int opening_ GUARDED_BY(mu_) = 0;
  std::vector<int> opening_by_shard_ GUARDED_BY(mu_);               // shard-aware opens in progress
  int failures_ GUARDED_BY(mu_) = 0;                                // consecutive failed opens
  bool reconnect_scheduled_ GUARDED_BY(mu_) = false;
  bool closed_ GUARDED_BY(mu_) = false;
  std::optional<ShardInfo> sharding_ GUARDED_BY(mu_);
  std::unique_ptr<asio::steady_timer> timer_ GUARDED_BY(mu_);
  // Growth past a refusal: refusals in a row, whether the probe (one open
  // past the limit) is under way, and its timer.
  int growth_refusals_ GUARDED_BY(mu_) = 0;
  bool growth_probe_ GUARDED_BY(mu_) = false;
  bool growth_probe_scheduled_ GUARDED_BY(mu_) = false;
  std::unique_ptr<asio::steady_timer> growth_timer_ GUARDED_BY(mu_);
  // Shrinking: since when conns_[i] has been parked (none: in use), the
  // connections retired from Pick() and not yet closed, and the timer of
  // both. While there is a surplus, the connections at conns_[in_use_] and
  // after are parked (Pick() prefers the others); no surplus: none.
  std::vector<std::optional<std::chrono::steady_clock::time_point>> conn_parked_ GUARDED_BY(mu_);
  size_t in_use_ GUARDED_BY(mu_) = SIZE_MAX;
  std::vector<std::shared_ptr<Connection>> retiring_ GUARDED_BY(mu_);
  bool trim_scheduled_ GUARDED_BY(mu_) = false;
  std::unique_ptr<asio::steady_timer> trim_timer_ GUARDED_BY(mu_);
  std::string last_error_ GUARDED_BY(mu_);
  uint64_t pick_random_ GUARDED_BY(mu_) = 0x9e3779b97f4a7c15ULL;  // NextRandom()'s state
  // Requests in flight over every connection this pool opened (InFlight()).
  const std::shared_ptr<std::atomic<int>> in_flight_total_ = std::make_shared<std::atomic<int>>(0);
};

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_POOL_H_
