// Copyright (c) cqlstream authors.
//
// ControlConnection: the one connection of a session that learns the
// cluster.
//
//  * Open() connects to the first contact point that answers (an
//    authentication or TLS failure ends the search: another host will not
//    fix it), reads system.local, system.peers_v2 (system.peers on servers
//    without it) and system_schema.keyspaces (parsing: net/system_tables.h),
//    and hands the topology to its owner (BuildTopology, a pure function).
//  * With watch_events, it registers for TOPOLOGY_CHANGE, STATUS_CHANGE and
//    SCHEMA_CHANGE: a host reported UP has its pool refilled at once, one
//    reported DOWN is marked down; topology and schema changes re-read the
//    system tables (debounced). When the connection is lost it is reopened
//    after the session's reconnection backoff (ExponentialBackoff, jittered
//    like the pools'), on any known host: up hosts first, then down ones,
//    then the contact points (ControlCandidates).
//
// Thread-safety: every method is thread-safe; callbacks run on the owner's
// I/O threads; the lock is never held while calling out.
// Ownership: owned by the session (std::shared_ptr); its callbacks hold it
// weakly and reach the owner through a weak_ptr.
#ifndef CQLSTREAM_NET_CONTROL_H_
#define CQLSTREAM_NET_CONTROL_H_

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cql/response.h"
#include "cqlstream/status.h"
#include "net/connection.h"
#include "net/policies.h"
#include "net/system_tables.h"
#include "net/topology.h"
#include "util/mutex.h"

namespace cqlstream::net {

// What the control connection needs from its session; called without the
// control connection's lock held.
class ControlOwner {
 public:
  virtual ~ControlOwner() = default;
  virtual bool closed() const = 0;
  virtual asio::io_context& NextIo() = 0;
  virtual Connection::Options ConnectionOptionsFor(const std::string& address, uint16_t port) = 0;
  // The published topology (nullptr before the first).
  virtual std::shared_ptr<const Topology> Topo() const = 0;
  // Adopts a freshly read topology (keeps the pools of known hosts).
  virtual void ApplyTopology(std::shared_ptr<Topology> topology) = 0;
};

struct ControlConfig {
  std::vector<std::string> contact_points;
  uint16_t port = 9042;  // of the contact points, and of peers that name none
  std::chrono::milliseconds request_timeout{12000};
  bool watch_events = true;
  ExponentialBackoff reconnect{std::chrono::milliseconds(100), std::chrono::milliseconds(10000)};
};

// The topology the system tables describe. The control connection's own host
// (system.local) comes first, under the address it was reached by
// (`contact`); hosts take `default_port` unless the table names theirs.
// A peer row naming a host already listed (the same endpoint, or the
// control connection's own host by its non-empty host id) is left out and
// counted in Topology::ignored_peers.
// Hosts have no pool yet. Pure.
std::shared_ptr<Topology> BuildTopology(SystemLocal local, const std::string& contact,
                                        std::vector<SystemHost> peers,
                                        std::map<std::string, std::map<std::string, std::string>> replication,
                                        uint16_t default_port);

// Where to reopen a lost control connection: up hosts, then down hosts (in
// topology order), then the contact points. Pure.
std::vector<std::string> ControlCandidates(const Topology* topology, const std::vector<std::string>& contact_points);

class ControlConnection : public std::enable_shared_from_this<ControlConnection> {
 public:
  static std::shared_ptr<ControlConnection> Make(ControlConfig config, std::weak_ptr<ControlOwner> owner);
  ControlConnection(ControlConfig config, std::weak_ptr<ControlOwner> owner);

  // Opens the connection on the first contact point that answers and loads
  // the topology; `done` runs once (on an I/O thread) with the outcome: the
  // first candidate's failure when none answers.
  void Open(std::function<void(Status)> done);
  // Closes the connection and stops refreshing and reconnecting.
  void Close();

 private:
  void OpenOn(std::vector<std::string> candidates, size_t index, std::function<void(Status)> done,
              Status first_error);
  void Adopt(const std::shared_ptr<Connection>& conn, const std::string& contact, std::function<void(Status)> done);
  void Reconnect();
  // on_close of every connection: only the adopted one's loss reconnects (a
  // candidate that fails before adoption is its opener's business).
  void OnConnectionClosed();
  void OnEvent(const cql::Event& e);
  void ScheduleRefresh(std::chrono::milliseconds delay);
  void LoadTopology(const std::shared_ptr<Connection>& c, const std::string& contact,
                    std::function<void(Status)> done);
  // Runs one simple query on `c` and hands back its Rows.
  void RunOn(const std::shared_ptr<Connection>& c, std::string query,
             std::function<void(StatusOr<cql::Rows>)> done) const;

  const ControlConfig config_;
  const std::weak_ptr<ControlOwner> owner_;

  Mutex mu_;
  std::shared_ptr<Connection> conn_ GUARDED_BY(mu_);
  bool reconnecting_ GUARDED_BY(mu_) = false;
  bool closed_ GUARDED_BY(mu_) = false;
  int failures_ GUARDED_BY(mu_) = 0;  // consecutive reconnections that failed
  std::unique_ptr<asio::steady_timer> refresh_timer_ GUARDED_BY(mu_);
  // The pending reconnection's backoff (cancelled by Close).
  std::shared_ptr<asio::steady_timer> reconnect_timer_ GUARDED_BY(mu_);
};

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_CONTROL_H_
