// Copyright (c) cqlstream authors.
#include "net/session_impl.h"

#include <fmt/format.h>

#include <cstdio>
#include <set>

#include "net/routing/murmur3.h"
#include "net/sni_endpoint.h"

namespace cqlstream::net {

Connection::Options Session::Impl::ConnectionOptionsFor(const std::string& address, uint16_t port) {
  Connection::Options o;
  o.transport.host = address;
  o.transport.port = port;
  o.transport.connect_timeout = opts.connect_timeout;
  if (tls) {
    o.transport.tls = tls;
    o.transport.tls_server_name = opts.tls->server_name;
    o.transport.tls_verify = !opts.tls->insecure_skip_verify;
  }
  // Behind an SNI proxy (secure-connect bundles): the proxy, with the host id as TLS server name.
  if (opts.sni_proxy) RouteThroughSniProxy(*opts.sni_proxy, SniHostId(Topo().get(), address), &o.transport);
  o.username = opts.username;
  o.password = opts.password;
  o.max_frame_bytes = opts.max_frame_bytes;
  o.registry = connections;
  return o;
}

void Session::Impl::OnConnectionClosed(const Connection& c) {
  ConnectionStats s = c.stats();
  closed_bytes_read += s.bytes_read;
  closed_bytes_written += s.bytes_written;
  closed_direct += s.direct_bytes;
  closed_copied += s.copied_bytes;
}

PoolConfig Session::Impl::MakePoolConfig() const {
  PoolConfig c;
  c.tls = tls != nullptr;
  c.shard_aware = opts.shard_aware;
  c.max_shard_connections = opts.max_shard_connections;
  c.reconnect = ReconnectBackoff();
  return c;
}

ControlConfig Session::Impl::MakeControlConfig() const {
  ControlConfig c;
  c.contact_points = opts.hosts;
  c.port = opts.port;
  c.request_timeout = opts.request_timeout;
  c.watch_events = sopts.watch_events;
  c.reconnect = ReconnectBackoff();
  return c;
}

std::shared_ptr<const Topology> Session::Impl::Topo() const {
  MutexLock l(&topo_mu);
  return topo;
}

std::string Session::Impl::LocalDc() const {
  MutexLock l(&topo_mu);
  return local_dc;
}

namespace {

// Whether two descriptions of one endpoint agree on everything a plan or the
// routing reads.
bool SameDescription(const Host& a, const Host& b) {
  return a.datacenter == b.datacenter && a.rack == b.rack && a.release_version == b.release_version &&
         a.host_id == b.host_id && a.schema_version == b.schema_version && a.tokens == b.tokens &&
         a.announced == b.announced;
}

}  // namespace

void Session::Impl::ApplyTopology(std::shared_ptr<Topology> t) {
  std::vector<HostPtr> to_fill;
  std::vector<HostPtr> removed;
  std::vector<std::pair<HostPtr, std::string>> moved;  // (a known host's old object, where it went)
  {
    MutexLock l(&topo_mu);
    // Keep existing Host objects (and their pools) for known hosts: by host
    // id when both sides know it (the control connection's own host is listed
    // under the address it was reached by, which changes when the control
    // connection moves to another host), else by endpoint. A host id that
    // is not unique on either side (a misconfigured cluster, a node that
    // replaced a dead one under its id while the dead one's row remains) is
    // not trusted to name a host.
    std::vector<HostPtr> old = topo ? topo->hosts : std::vector<HostPtr>{};
    std::map<std::string, size_t> by_id, by_endpoint;
    std::map<std::string, int> new_ids;
    for (const auto& h : t->hosts) ++new_ids[h->host_id];
    std::set<std::string> repeated;
    for (size_t i = 0; i < old.size(); ++i) {
      if (!by_id.emplace(old[i]->host_id, i).second) repeated.insert(old[i]->host_id);
      by_endpoint.emplace(old[i]->endpoint(), i);
    }
    for (const auto& id : repeated) by_id.erase(id);
    std::vector<bool> kept(old.size(), false);
    auto match = [&](const Host& h) -> std::optional<size_t> {
      auto it = by_id.find(h.host_id);
      if (!h.host_id.empty() && new_ids[h.host_id] == 1 && it != by_id.end() && !kept[it->second]) {
        return it->second;
      }
      if (auto it = by_endpoint.find(h.endpoint()); it != by_endpoint.end() && !kept[it->second]) return it->second;
      return std::nullopt;
    };
    // The endpoints the new rows are listed at, before any keeps a known address.
    std::set<std::string> listed;
    for (const auto& h : t->hosts) listed.insert(h->endpoint());
    for (auto& h : t->hosts) {
      std::optional<size_t> i = match(*h);
      // A host whose row announces another endpoint than the row it was
      // known by (matched by host id) has moved: its pool is closed and it
      // gets a new one where it now is, or it would go on connecting to the
      // old address, where another node may be by now. Otherwise a host
      // known at another address than its row is listed at (the control
      // connection's host is listed under the address it was reached by,
      // and announces nothing) keeps the known one (below), unless another
      // row is listed there now: that address is the other row's, and
      // keeping it would list one endpoint twice (two hosts, two pools
      // connecting there). Endpoints stay one host each: a host is at the
      // endpoint its row is listed at, or at a known one no row is at.
      const auto moved_away = [&](const Host& known) {
        if (!h->announced.empty() && !known.announced.empty() && h->announced != known.announced) return true;
        return !SameEndpoint(known, *h) && listed.count(known.endpoint()) > 0;
      };
      if (i && moved_away(*old[*i])) {
        kept[*i] = true;
        moved.emplace_back(old[*i], h->endpoint());
        i.reset();
      }
      if (i) {
        kept[*i] = true;
        const HostPtr& known = old[*i];
        // The pool goes on connecting where it did: the host keeps its address.
        h->address = known->address;
        h->port = known->port;
        // A published Host is read without a lock (query plans, routing), so
        // it is never written: an unchanged host keeps its object, a changed
        // one is a new object that takes over the pool (plans in flight keep
        // the old object, which shares that pool).
        if (SameDescription(*known, *h)) {
          h = known;
        } else {
          h->pool = known->pool;
        }
      } else {
        h->pool = HostPool::Make(h->address, h->port, MakePoolConfig(), weak_from_this());
        to_fill.push_back(h);
      }
    }
    for (size_t i = 0; i < old.size(); ++i) {
      if (!kept[i]) removed.push_back(old[i]);
    }
    if (local_dc.empty()) {
      local_dc = opts.local_dc.empty() && !t->hosts.empty() ? t->hosts.front()->datacenter : opts.local_dc;
    }
    topo = std::move(t);
    rings.clear();
  }
  for (auto& h : removed) {
    h->pool->Close(Status::ConnectionLost(fmt::format("host {} left the cluster", h->endpoint())));
  }
  for (auto& [h, to] : moved) {
    h->pool->Close(Status::ConnectionLost(fmt::format("host {} moved to {}", h->endpoint(), to)));
  }
  for (auto& h : to_fill) h->pool->Fill();
}

std::shared_ptr<const ReplicaIndex> Session::Impl::Ring(const std::shared_ptr<const Topology>& topology,
                                                       const std::string& keyspace) {
  if (!topology) return nullptr;
  auto rep = topology->replication.find(keyspace);
  if (rep == topology->replication.end()) return nullptr;
  {
    MutexLock l(&topo_mu);
    if (topology != topo) {
      // An older snapshot (a refresh landed since the plan took it): built
      // for this call, not cached, so that the plan's hosts stay one snapshot's.
      return ReplicaIndex::Build(topology->hosts, rep->second);
    }
    auto it = rings.find(keyspace);
    if (it != rings.end()) return it->second;
  }
  std::shared_ptr<const ReplicaIndex> ring = ReplicaIndex::Build(topology->hosts, rep->second);
  MutexLock l(&topo_mu);
  // nullptr too: not routable, don't retry each time. Only while still current.
  if (topology == topo) rings[keyspace] = ring;
  return ring;
}

std::vector<HostPtr> Session::Impl::Replicas(const std::shared_ptr<const Topology>& topology,
                                             const std::string& keyspace, int64_t token) {
  auto ring = Ring(topology, keyspace);
  return ring ? ring->Replicas(token) : std::vector<HostPtr>{};
}

uint64_t Session::Impl::ReplicaSetOf(const std::string& keyspace, int64_t token) {
  auto ring = Ring(Topo(), keyspace);
  return ring ? ring->ReplicaSet(token, LocalDc()) : 0;
}

RoutingInfo RoutingOf(const Statement& st) {
  RoutingInfo r;
  r.target_host = st.target_host;
  r.plan_offset = st.plan_offset;
  if (st.prepared && !st.prepared->pk_indexes.empty()) {
    r.keyspace = st.prepared->keyspace;
    // The routing key (routing/murmur3.h RoutingKey: one component as
    // encoded; several in its composite layout, CloseComponent) encoded into
    // one buffer and hashed: this runs for every request, where a vector of
    // parts, one per part and a vector of views cost n + 2 allocations.
    const auto& pk = st.prepared->pk_indexes;
    const bool composite = pk.size() > 1;
    cql::Bytes key;
    key.reserve(composite ? 16 * pk.size() : 16);
    for (uint16_t idx : pk) {
      if (idx >= st.values.size() || idx >= st.prepared->bind_types.size() || st.values[idx].is_null()) return r;
      const size_t at = key.size();
      if (composite) key.resize(at + routing::kComponentLengthBytes);
      if (!EncodeCell(st.values[idx], st.prepared->bind_types[idx], &key).ok()) return r;
      // Longer than its u16 length holds: no token, as PartitionKeyToken.
      if (composite && !routing::CloseComponent(&key, at)) return r;
    }
    r.token = routing::Murmur3Token(key);
  } else if (st.routing_key) {
    r.token = routing::Murmur3Token(*st.routing_key);
    r.keyspace = st.routing_keyspace;
  }
  return r;
}

std::vector<HostPtr> Session::Impl::QueryPlan(const Statement& st, std::optional<int64_t>* token) {
  auto t = Topo();
  const RoutingInfo routing = RoutingOf(st);
  *token = routing.token;
  if (!t) return {};
  const std::string dc = LocalDc();
  // `t` by reference: the view lives for this call only, and a capture this
  // small is kept inside the std::function (no allocation per request).
  ClusterView view{t->hosts, dc, [this, &t](const std::string& ks, int64_t tok) { return Replicas(t, ks, tok); }};
  return sopts.load_balancing->Plan(routing, view);
}

namespace {

// Loopback addresses and "localhost"; a host name is not resolved here (it
// may name another machine) and counts as not loopback.
bool IsLoopback(const std::string& host) {
  if (host == "localhost") return true;
  std::error_code ec;
  auto a = asio::ip::make_address(host, ec);
  return !ec && a.is_loopback();
}

}  // namespace

PreparedPtr Session::Impl::RememberPrepared(const std::string& query, const cql::Prepared& p) {
  auto ps = std::make_shared<PreparedStatement>();
  ps->query = query;
  ps->id = p.id;
  ps->bind_columns = p.bind_metadata.bind_columns;
  for (const auto& c : ps->bind_columns) ps->bind_types.push_back(c.type);
  ps->pk_indexes = p.bind_metadata.pk_indexes;
  ps->result_metadata = p.result_metadata;
  if (!ps->bind_columns.empty()) {
    ps->keyspace = ps->bind_columns.front().keyspace;
    ps->table = ps->bind_columns.front().table;
  } else if (!ps->result_metadata.columns.empty()) {
    ps->keyspace = ps->result_metadata.columns.front().keyspace;
    ps->table = ps->result_metadata.columns.front().table;
  }
  PreparedPtr out = ps;
  MutexLock l(&prepared_mu);
  auto [it, inserted] = prepared.emplace(query, out);
  if (!inserted) it->second = out;
  return out;
}

void Session::Impl::WarnPlaintextCredentials() {
  if (tls || opts.username.empty()) return;
  std::string remote;
  for (const auto& h : opts.hosts) {
    if (remote.empty() && !IsLoopback(h)) remote = h;
  }
  if (auto t = Topo()) {
    for (const auto& h : t->hosts) {
      if (remote.empty() && !IsLoopback(h->address)) remote = h->address;
    }
  }
  if (remote.empty() || plaintext_warned.exchange(true)) return;
  std::fprintf(stderr,
               "cqlstream: WARNING: the credentials of user '%s' are sent without TLS to %s (and to every host the "
               "cluster names); anyone on the path can read them: use --tls-ca (or tls options)\n",
               opts.username.c_str(), remote.c_str());
}

void Session::Impl::Shutdown() {
  if (is_closed.exchange(true)) return;
  if (control) control->Close();
  if (auto t = Topo()) {
    for (auto& h : t->hosts) h->pool->Close(Status::Cancelled("session closed"));
  }
  // The connects under way and the connections still in their handshake:
  // left to the I/O threads' grace period, one waiting on a silent host would
  // hold Stop for it, and then, abandoned, a connection would keep itself
  // alive (its pending requests hold it).
  connections->CloseAll(Status::Cancelled("session closed"));
  io->Stop();
}

}  // namespace cqlstream::net
