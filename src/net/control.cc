// Copyright (c) cqlstream authors.
#include "net/control.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "cql/request.h"

namespace cqlstream::net {

namespace {

HostPtr MakeHost(SystemHost&& sh, std::string address, uint16_t port) {
  auto h = std::make_shared<Host>();
  h->address = std::move(address);
  h->port = sh.port.value_or(port);
  h->datacenter = std::move(sh.datacenter);
  h->rack = std::move(sh.rack);
  h->release_version = std::move(sh.release_version);
  h->host_id = std::move(sh.host_id);
  h->schema_version = std::move(sh.schema_version);
  h->tokens = std::move(sh.tokens);
  return h;
}

// The system tables of one host as they arrive, until all are read.
struct TopologyRead {
  SystemLocal local;
  std::vector<SystemHost> peers;
};

}  // namespace

std::shared_ptr<Topology> BuildTopology(SystemLocal local, const std::string& contact,
                                        std::vector<SystemHost> peers,
                                        std::map<std::string, std::map<std::string, std::string>> replication,
                                        uint16_t default_port) {
  auto t = std::make_shared<Topology>();
  t->cluster_name = std::move(local.cluster_name);
  t->hosts.push_back(MakeHost(std::move(local.host), contact, default_port));
  for (SystemHost& p : peers) {
    std::string address = p.address;
    HostPtr h = MakeHost(std::move(p), std::move(address), default_port);
    h->announced = h->endpoint();
    // A row naming a host already listed would be a second host object and
    // pool for one node: more connections to it than asked for, its tokens
    // twice in the ring. The first row stands. Peers are told apart by
    // endpoint; the control connection's own host also by its id (it lists
    // itself among its peers under another address than the contact's). Two
    // peers of one id at two endpoints both stay: a node replacing a dead
    // one may take over its id, and which row is live cannot be told here.
    const bool listed =
        (!h->host_id.empty() && h->host_id == t->hosts.front()->host_id) ||
        std::any_of(t->hosts.begin(), t->hosts.end(), [&h](const HostPtr& o) { return SameEndpoint(*o, *h); });
    if (listed) {
      ++t->ignored_peers;
      continue;
    }
    t->hosts.push_back(std::move(h));
  }
  t->replication = std::move(replication);
  return t;
}

std::vector<std::string> ControlCandidates(const Topology* topology, const std::vector<std::string>& contact_points) {
  std::vector<std::string> out;
  if (topology != nullptr) {
    for (const auto& h : topology->hosts) {
      if (h->up()) out.push_back(h->address);
    }
    for (const auto& h : topology->hosts) {
      if (!h->up()) out.push_back(h->address);
    }
  }
  out.insert(out.end(), contact_points.begin(), contact_points.end());
  return out;
}

std::shared_ptr<ControlConnection> ControlConnection::Make(ControlConfig config, std::weak_ptr<ControlOwner> owner) {
  return std::make_shared<ControlConnection>(std::move(config), std::move(owner));
}

ControlConnection::ControlConnection(ControlConfig config, std::weak_ptr<ControlOwner> owner)
    : config_(std::move(config)), owner_(std::move(owner)) {}

void ControlConnection::Open(std::function<void(Status)> done) {
  OpenOn(config_.contact_points, 0, std::move(done), Status::OK());
}

void ControlConnection::RunOn(const std::shared_ptr<Connection>& c, std::string query,
                              std::function<void(StatusOr<cql::Rows>)> done) const {
  cql::QueryParameters qp;
  qp.consistency = cql::Consistency::kOne;
  auto frame = cql::EncodeQuery(query, qp);
  if (!frame.ok()) return done(frame.status());
  c->Send(std::move(*frame), nullptr, config_.request_timeout,
          [done = std::move(done), query](StatusOr<Reply> r) {
            if (!r.ok()) return done(r.status().WithContext(query));
            if (const ServerError* e = r->server_error()) {
              return done(Status::FromServer(std::make_shared<ServerError>(*e)).WithContext(query));
            }
            auto* res = r->response ? std::get_if<cql::Result>(&r->response->message) : nullptr;
            auto* rows = res ? std::get_if<cql::Rows>(res) : nullptr;
            if (!rows) return done(Status::ProtocolError(fmt::format("'{}' returned no rows result", query)));
            done(std::move(*rows));
          });
}

// Reads system.local, the peers and the keyspaces' replication on `c` and
// hands the topology to the owner.
void ControlConnection::LoadTopology(const std::shared_ptr<Connection>& c, const std::string& contact,
                                     std::function<void(Status)> done) {
  auto self = shared_from_this();
  auto read = std::make_shared<TopologyRead>();
  auto on_keyspaces = [self, read, contact, done](StatusOr<cql::Rows> ks) {
    if (!ks.ok()) return done(ks.status());
    auto rep = ParseKeyspaces(*ks);
    if (!rep.ok()) return done(rep.status());
    auto owner = self->owner_.lock();
    if (!owner) return done(Status::Cancelled("session closed"));
    owner->ApplyTopology(BuildTopology(std::move(read->local), contact, std::move(read->peers), std::move(*rep),
                                       self->config_.port));
    done(Status::OK());
  };
  auto on_peers = [self, c, read, done, on_keyspaces](StatusOr<cql::Rows> peers, bool v2) {
    if (!peers.ok()) return done(peers.status());
    auto ps = ParseSystemPeers(*peers, v2);
    if (!ps.ok()) return done(ps.status());
    read->peers = std::move(*ps);
    self->RunOn(c, kKeyspacesQuery, on_keyspaces);
  };
  RunOn(c, kLocalQuery, [self, c, read, done, on_peers](StatusOr<cql::Rows> local) {
    if (!local.ok()) return done(local.status());
    auto l = ParseSystemLocal(*local);
    if (!l.ok()) return done(l.status());
    read->local = std::move(*l);
    self->RunOn(c, kPeersV2Query, [self, c, on_peers](StatusOr<cql::Rows> p2) {
      const ServerError* e = p2.ok() ? nullptr : p2.status().server_error();
      if (e != nullptr && e->typed() == ServerErrorCode::kInvalid) {
        // Older servers (and ScyllaDB) have only system.peers.
        return self->RunOn(c, kPeersQuery, [on_peers](StatusOr<cql::Rows> p1) { on_peers(std::move(p1), false); });
      }
      on_peers(std::move(p2), true);
    });
  });
}

void ControlConnection::OpenOn(std::vector<std::string> candidates, size_t index, std::function<void(Status)> done,
                               Status first_error) {
  if (index >= candidates.size()) {
    return done(first_error.ok() ? Status::ConnectFailed("no contact point answered") : first_error);
  }
  auto owner = owner_.lock();
  if (!owner || owner->closed()) return done(Status::Cancelled("session closed"));
  Connection::Options o = owner->ConnectionOptionsFor(candidates[index], config_.port);
  std::weak_ptr<ControlConnection> weak = weak_from_this();
  if (config_.watch_events) {
    o.event_types = {"TOPOLOGY_CHANGE", "STATUS_CHANGE", "SCHEMA_CHANGE"};
    o.on_event = [weak](const cql::Event& e) {
      if (auto self = weak.lock()) self->OnEvent(e);
    };
    o.on_close = [weak](const Status&) {
      if (auto self = weak.lock()) self->OnConnectionClosed();
    };
  }
  const std::string contact = candidates[index];
  Connection::Open(owner->NextIo(), std::move(o),
                   [weak, candidates = std::move(candidates), index, done = std::move(done), contact,
                    first_error = std::move(first_error)](StatusOr<std::shared_ptr<Connection>> c) mutable {
                     auto self = weak.lock();
                     if (!self) return;
                     if (c.ok()) return self->Adopt(*c, contact, std::move(done));
                     Status err = c.status();
                     // Authentication and TLS failures are not fixed by another host.
                     if (err.code() == Status::Code::kAuthError || err.code() == Status::Code::kTlsError) {
                       return done(err);
                     }
                     self->OpenOn(std::move(candidates), index + 1, std::move(done),
                                  first_error.ok() ? std::move(err) : std::move(first_error));
                   });
}

// Loads the topology on a fresh connection and keeps it when that worked.
// A connection that closed meanwhile is not kept (its on_close, before
// adoption, reconnected nothing); one adopted while another is current (a
// retried Open racing a background reconnection) replaces it, and the
// replaced one is closed rather than leaked.
void ControlConnection::Adopt(const std::shared_ptr<Connection>& conn, const std::string& contact,
                              std::function<void(Status)> done) {
  auto self = shared_from_this();
  LoadTopology(conn, contact, [self, conn, done = std::move(done)](Status s) {
    std::shared_ptr<Connection> replaced;
    if (s.ok()) {
      MutexLock l(&self->mu_);
      if (self->closed_) {
        s = Status::Cancelled("session closed");
      } else if (conn->closed()) {
        s = Status::ConnectionLost("the control connection closed while reading the system tables");
      } else {
        if (self->conn_ != conn) replaced = std::move(self->conn_);
        self->conn_ = conn;
        self->failures_ = 0;
      }
    }
    if (replaced) replaced->Close(Status::Cancelled("control connection replaced"));
    if (!s.ok()) conn->Close(s);
    done(s);
  });
}

void ControlConnection::OnConnectionClosed() {
  {
    MutexLock l(&mu_);
    if (!conn_ || !conn_->closed()) return;
  }
  Reconnect();
}

void ControlConnection::Reconnect() {
  std::chrono::milliseconds delay;
  auto owner = owner_.lock();
  if (!owner || owner->closed()) return;
  auto timer = std::make_shared<asio::steady_timer>(owner->NextIo());
  {
    MutexLock l(&mu_);
    if (closed_ || reconnecting_) return;
    reconnecting_ = true;
    conn_.reset();
    // The same jittered backoff as the pools': every client of a restarted
    // cluster must not come back at the same instants.
    delay = config_.reconnect.Delay(failures_ + 1);
    ++failures_;
    timer->expires_after(delay);
    reconnect_timer_ = timer;
  }
  std::weak_ptr<ControlConnection> weak = weak_from_this();
  // async_wait under mu_: Close cancels the timer under mu_ from another
  // thread, and an asio timer is not safe for concurrent use (the handler
  // runs later on the I/O thread, never inside async_wait).
  MutexLock lock(&mu_);
  if (closed_) return;  // closed since: its cancel came before this wait
  timer->async_wait([weak, timer](std::error_code ec) {
    auto self = weak.lock();
    if (!self || ec) return;
    {
      MutexLock l(&self->mu_);
      if (self->reconnect_timer_ == timer) self->reconnect_timer_.reset();
      if (self->closed_) return;
    }
    auto owner = self->owner_.lock();
    if (!owner || owner->closed()) return;
    std::vector<std::string> candidates = ControlCandidates(owner->Topo().get(), self->config_.contact_points);
    owner.reset();
    self->OpenOn(std::move(candidates), 0,
                 [weak](Status s) {
                   auto self = weak.lock();
                   if (!self) return;
                   {
                     MutexLock l(&self->mu_);
                     self->reconnecting_ = false;
                   }
                   if (!s.ok()) self->Reconnect();
                 },
                 Status::OK());
  });
}

void ControlConnection::OnEvent(const cql::Event& e) {
  if (auto* sc = std::get_if<cql::StatusChangeEvent>(&e)) {
    const std::string addr = cql::FormatAddress(sc->address.address);
    auto owner = owner_.lock();
    auto t = owner ? owner->Topo() : nullptr;
    if (!t) return;
    for (auto& h : t->hosts) {
      if (h->address != addr || !h->pool) continue;
      if (sc->change == "UP") {
        h->pool->Fill();  // reconnect now rather than at the next backoff
      } else if (sc->change == "DOWN") {
        h->pool->MarkDown();
      }
    }
    return;
  }
  // Topology and schema changes: re-read the system tables (debounced).
  ScheduleRefresh(std::chrono::milliseconds(500));
}

void ControlConnection::ScheduleRefresh(std::chrono::milliseconds delay) {
  auto owner = owner_.lock();
  if (!owner || owner->closed()) return;
  MutexLock l(&mu_);
  if (closed_ || refresh_timer_) return;
  refresh_timer_ = std::make_unique<asio::steady_timer>(owner->NextIo());
  refresh_timer_->expires_after(delay);
  std::weak_ptr<ControlConnection> weak = weak_from_this();
  refresh_timer_->async_wait([weak](std::error_code ec) {
    auto self = weak.lock();
    if (!self) return;
    std::shared_ptr<Connection> c;
    {
      MutexLock l(&self->mu_);
      self->refresh_timer_.reset();
      c = self->conn_;
    }
    auto owner = self->owner_.lock();
    if (ec || !c || c->closed() || !owner || owner->closed()) return;
    // The control connection's own host keeps the address we reached it by.
    std::string contact;
    if (auto t = owner->Topo(); t && !t->hosts.empty()) contact = t->hosts.front()->address;
    self->LoadTopology(c, contact, [](Status) {});
  });
}

void ControlConnection::Close() {
  std::shared_ptr<Connection> conn;
  {
    MutexLock l(&mu_);
    closed_ = true;
    conn = std::move(conn_);
    if (refresh_timer_) refresh_timer_->cancel();
    // A reconnection waiting out its backoff must not hold the I/O threads
    // (IoPool::Stop would wait its whole grace period for the timer).
    if (reconnect_timer_) reconnect_timer_->cancel();
    reconnect_timer_.reset();
  }
  if (conn) conn->Close(Status::Cancelled("session closed"));
}

}  // namespace cqlstream::net
