// Copyright (c) cqlstream authors.
#include "net/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <unordered_map>

#include "net/connection.h"
#include "net/control.h"
#include "net/io_pool.h"
#include "net/load_balancing.h"
#include "net/pool.h"
#include "net/routing/murmur3.h"
#include "net/system_tables.h"
#include "net/topology.h"
#include "util/mutex.h"

namespace cqlstream::net {

using Clock = std::chrono::steady_clock;

std::optional<cql::Bytes> ResultSet::paging_state() const {
  if (streamed) return streamed_metadata.paging_state;
  if (const cql::Rows* r = rows()) return r->metadata().paging_state;
  return std::nullopt;
}


// ============================================================================
// Hosts and their connection pools
// ============================================================================

// ============================================================================
// Session::Impl
// ============================================================================

struct Execution;

struct Session::Impl : PoolOwner, ControlOwner, std::enable_shared_from_this<Session::Impl> {
  ConnectionOptions opts;
  SessionOptions sopts;
  std::unique_ptr<IoPool> io;
  std::shared_ptr<asio::ssl::context> tls;

  mutable Mutex topo_mu;
  std::shared_ptr<const Topology> topo GUARDED_BY(topo_mu);
  std::map<std::string, std::shared_ptr<const ReplicaIndex>> rings GUARDED_BY(topo_mu);
  std::string local_dc GUARDED_BY(topo_mu);

  std::shared_ptr<ControlConnection> control;  // set by Connect before any I/O

  Mutex prepared_mu;
  std::unordered_map<std::string, PreparedPtr> prepared GUARDED_BY(prepared_mu);

  std::atomic<bool> is_closed{false};
  std::atomic<int> conns_per_host{1};
  LatencyTracker latencies;
  std::atomic<uint64_t> latency_samples{0};

  struct Counters {
    std::atomic<uint64_t> requests{0}, executions{0}, retries{0}, hedges{0}, hedge_wins{0}, timeouts{0},
        errors{0}, reprepares{0}, reconnects{0};
  } counters;
  // Bytes of connections that were closed (live ones are summed on demand).
  std::atomic<uint64_t> closed_bytes_read{0}, closed_bytes_written{0}, closed_direct{0}, closed_copied{0};

  // --- PoolOwner and ControlOwner ------------------------------------------
  bool closed() const override { return is_closed.load(); }
  asio::io_context& NextIo() override { return io->Next(); }
  Connection::Options ConnectionOptionsFor(const std::string& address, uint16_t port) override {
    Connection::Options o;
    o.transport.host = address;
    o.transport.port = port;
    o.transport.connect_timeout = opts.connect_timeout;
    if (tls) {
      o.transport.tls = tls;
      o.transport.tls_server_name = opts.tls->server_name;
      o.transport.tls_verify = !opts.tls->insecure_skip_verify;
    }
    o.username = opts.username;
    o.password = opts.password;
    o.max_frame_bytes = opts.max_frame_bytes;
    return o;
  }
  int ConnectionsPerHost() const override { return conns_per_host.load(std::memory_order_relaxed); }
  void OnConnectionClosed(const Connection& c) override {
    ConnectionStats s = c.stats();
    closed_bytes_read += s.bytes_read;
    closed_bytes_written += s.bytes_written;
    closed_direct += s.direct_bytes;
    closed_copied += s.copied_bytes;
  }
  void OnPoolUp() override { counters.reconnects++; }

  // The one reconnection policy of pools and the control connection.
  ExponentialBackoff ReconnectBackoff() const { return ExponentialBackoff(opts.reconnect_base, opts.reconnect_max); }
  PoolConfig MakePoolConfig() const {
    PoolConfig c;
    c.tls = tls != nullptr;
    c.shard_aware = opts.shard_aware;
    c.reconnect = ReconnectBackoff();
    return c;
  }
  ControlConfig MakeControlConfig() const {
    ControlConfig c;
    c.contact_points = opts.hosts;
    c.port = opts.port;
    c.request_timeout = opts.request_timeout;
    c.watch_events = sopts.watch_events;
    c.reconnect = ReconnectBackoff();
    return c;
  }

  // --- topology ------------------------------------------------------------
  std::shared_ptr<const Topology> Topo() const override {
    MutexLock l(&topo_mu);
    return topo;
  }
  std::string LocalDc() const {
    MutexLock l(&topo_mu);
    return local_dc;
  }
  std::shared_ptr<const ReplicaIndex> Ring(const std::string& keyspace);
  // Replicas of `token` in `keyspace` (cached per keyspace and topology).
  std::vector<HostPtr> Replicas(const std::string& keyspace, int64_t token);
  // The statement's plan from the load-balancing policy; its token in `token`.
  std::vector<HostPtr> QueryPlan(const Statement& st, std::optional<int64_t>* token);

  void ApplyTopology(std::shared_ptr<Topology> t) override;

  // Warns once (stderr) when credentials go over plaintext to a host that is
  // not a loopback address.
  void WarnPlaintextCredentials();
  std::atomic<bool> plaintext_warned{false};

  void Shutdown();
};

// ----------------------------------------------------------------------------
// Topology
// ----------------------------------------------------------------------------

void Session::Impl::ApplyTopology(std::shared_ptr<Topology> t) {
  std::vector<HostPtr> to_fill;
  std::vector<HostPtr> removed;
  {
    MutexLock l(&topo_mu);
    // Keep existing Host objects (and their pools) for known endpoints.
    std::map<std::string, HostPtr> old;
    if (topo) {
      for (const auto& h : topo->hosts) old[h->endpoint()] = h;
    }
    for (auto& h : t->hosts) {
      auto it = old.find(h->endpoint());
      if (it != old.end()) {
        HostPtr keep = it->second;
        keep->datacenter = h->datacenter;  // immutable in practice; refreshed for completeness
        keep->rack = h->rack;
        keep->release_version = h->release_version;
        keep->host_id = h->host_id;
        keep->schema_version = h->schema_version;
        keep->tokens = h->tokens;
        h = keep;
        old.erase(it);
      } else {
        h->pool = HostPool::Make(h->address, h->port, MakePoolConfig(), weak_from_this());
        to_fill.push_back(h);
      }
    }
    for (auto& [k, h] : old) removed.push_back(h);
    if (local_dc.empty()) {
      local_dc = opts.local_dc.empty() && !t->hosts.empty() ? t->hosts.front()->datacenter : opts.local_dc;
    }
    topo = std::move(t);
    rings.clear();
  }
  for (auto& h : removed) {
    h->pool->Close(Status::ConnectionLost(fmt::format("host {} left the cluster", h->endpoint())));
  }
  for (auto& h : to_fill) h->pool->Fill();
}

std::shared_ptr<const ReplicaIndex> Session::Impl::Ring(const std::string& keyspace) {
  MutexLock l(&topo_mu);
  auto it = rings.find(keyspace);
  if (it != rings.end()) return it->second;
  if (!topo) return nullptr;
  auto rep = topo->replication.find(keyspace);
  if (rep == topo->replication.end()) return nullptr;
  std::shared_ptr<const ReplicaIndex> ring = ReplicaIndex::Build(topo->hosts, rep->second);
  rings[keyspace] = ring;  // nullptr too: not routable, don't retry each time
  return ring;
}

std::vector<HostPtr> Session::Impl::Replicas(const std::string& keyspace, int64_t token) {
  auto ring = Ring(keyspace);
  return ring ? ring->Replicas(token) : std::vector<HostPtr>{};
}

// The routing facts of a statement: the token of its bound partition key (a
// prepared statement) or of its routing key, its keyspace, target and offset.
static RoutingInfo RoutingOf(const Statement& st) {
  RoutingInfo r;
  r.target_host = st.target_host;
  r.plan_offset = st.plan_offset;
  if (st.prepared && !st.prepared->pk_indexes.empty()) {
    r.keyspace = st.prepared->keyspace;
    std::vector<cql::Bytes> parts;
    for (uint16_t idx : st.prepared->pk_indexes) {
      if (idx >= st.values.size() || idx >= st.prepared->bind_types.size() || st.values[idx].is_null()) return r;
      cql::Bytes b;
      if (!EncodeCell(st.values[idx], st.prepared->bind_types[idx], &b).ok()) return r;
      parts.push_back(std::move(b));
    }
    std::vector<std::span<const uint8_t>> views(parts.begin(), parts.end());
    auto tk = routing::PartitionKeyToken(views);
    if (tk.ok()) r.token = *tk;
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
  ClusterView view{t->hosts, dc, [this](const std::string& ks, int64_t tok) { return Replicas(ks, tok); }};
  return sopts.load_balancing->Plan(routing, view);
}

void Session::Impl::Shutdown() {
  if (is_closed.exchange(true)) return;
  if (control) control->Close();
  if (auto t = Topo()) {
    for (auto& h : t->hosts) h->pool->Close(Status::Cancelled("session closed"));
  }
  io->Stop();
}

// ============================================================================
// Execution of one statement: plan, attempts, retries, hedges
// ============================================================================

struct Execution : std::enable_shared_from_this<Execution> {
  std::shared_ptr<Session::Impl> s;
  Statement st;
  cql::RequestFrame frame;
  ResultCallback cb;
  std::vector<HostPtr> plan;
  std::optional<int64_t> token;
  std::unique_ptr<RetrySession> retry;
  const SpeculativePolicy* spec = nullptr;
  std::chrono::milliseconds timeout{0};
  Clock::time_point t0 = Clock::now();

  Mutex mu;
  bool done GUARDED_BY(mu) = false;
  int started GUARDED_BY(mu) = 0;
  int outstanding GUARDED_BY(mu) = 0;
  int failures GUARDED_BY(mu) = 0;
  size_t next_host GUARDED_BY(mu) = 0;
  Status last_error GUARDED_BY(mu);
  std::vector<const Connection*> used GUARDED_BY(mu);
  std::unique_ptr<asio::steady_timer> hedge_timer GUARDED_BY(mu);
  std::unique_ptr<asio::steady_timer> retry_timer GUARDED_BY(mu);
  std::vector<bool> hedge_flags GUARDED_BY(mu);   // execution i was a hedge

  bool IsHedge(int execution) {
    MutexLock l(&mu);
    return execution >= 0 && static_cast<size_t>(execution) < hedge_flags.size() &&
           hedge_flags[static_cast<size_t>(execution)];
  }

  // Starts an execution on plan[host_index % plan.size()].
  void Attempt(size_t host_index, bool is_hedge);
  void OnReply(int execution, const HostPtr& host, std::shared_ptr<Connection> conn, Clock::time_point sent,
               StatusOr<Reply> r);
  void Fail(Status why);  // REQUIRES: mu held by caller? no: takes it
  void ArmHedge();
  void Reprepare(int execution, const HostPtr& host, std::shared_ptr<Connection> conn);
  void Retry(const Status& err, const HostPtr& host);
};

void Execution::Attempt(size_t host_index, bool is_hedge) {
  HostPtr host = plan[host_index % plan.size()];
  std::shared_ptr<Connection> conn;
  int execution = 0;
  {
    MutexLock l(&mu);
    if (done) return;
    // A host without an open connection (refused, down, still opening)
    // leaves the plan at once: the attempt goes to the next host of the plan
    // that has one, without spending a retry. Only when no host of the plan
    // has a connection does the attempt fail (ConnectFailed, nothing sent).
    for (size_t k = 0; k < plan.size(); ++k) {
      const HostPtr& cand = plan[(host_index + k) % plan.size()];
      conn = cand->pool->Pick(token, used);
      if (!conn) continue;
      host = cand;
      next_host = std::max(next_host, host_index + k);
      break;
    }
    if (conn) used.push_back(conn.get());
    execution = started++;
    hedge_flags.push_back(is_hedge);
    ++outstanding;
    if (is_hedge) s->counters.hedges++;
  }
  s->counters.executions++;
  if (!conn) {
    const std::string why = host->pool->last_error();
    OnReply(execution, host, nullptr, Clock::now(),
            // Nothing was sent: safe to try the next host for any statement.
            Status::ConnectFailed(fmt::format("no open connection to {}{}{}", host->endpoint(),
                                               why.empty() ? "" : ": ", why)));
    return;
  }
  std::shared_ptr<cql::CellSink> sink = st.sink ? st.sink(execution) : nullptr;
  cql::RequestFrame f{frame.opcode, frame.bytes};  // a copy per execution (small)
  const auto sent = Clock::now();
  auto self = shared_from_this();
  conn->Send(std::move(f), std::move(sink), timeout,
             [self, execution, host, conn, sent](StatusOr<Reply> r) {
               self->OnReply(execution, host, conn, sent, std::move(r));
             });
  ArmHedge();
}

void Execution::ArmHedge() {
  if (!st.idempotent || spec == nullptr) return;
  MutexLock l(&mu);
  if (done || hedge_timer) return;
  auto d = spec->NextDelay(started, s->latencies);
  if (!d) return;
  hedge_timer = std::make_unique<asio::steady_timer>(s->io->Next());
  hedge_timer->expires_after(*d);
  auto self = shared_from_this();
  hedge_timer->async_wait([self](std::error_code ec) {
    size_t idx;
    {
      MutexLock l(&self->mu);
      self->hedge_timer.reset();
      if (ec || self->done || self->outstanding == 0) return;
      // Another replica when there is one; else the same host on another
      // connection (PickConnection avoids connections already used).
      idx = ++self->next_host;
    }
    self->Attempt(idx, /*is_hedge=*/true);
  });
}

void Execution::Fail(Status why) {
  ResultCallback callback;
  {
    MutexLock l(&mu);
    if (done) return;
    done = true;
    if (hedge_timer) hedge_timer->cancel();
    if (retry_timer) retry_timer->cancel();
    callback = std::move(cb);
  }
  s->counters.errors++;
  callback(std::move(why));
}

void Execution::OnReply(int execution, const HostPtr& host, std::shared_ptr<Connection> conn,
                        Clock::time_point sent, StatusOr<Reply> r) {
  Status err;
  if (!r.ok()) {
    err = r.status();
    if (err.IsTimeout()) s->counters.timeouts++;
  } else if (const ServerError* e = r->server_error()) {
    if (e->typed() == ServerErrorCode::kUnprepared && st.prepared && conn) {
      return Reprepare(execution, host, std::move(conn));
    }
    err = Status::FromServer(std::make_shared<ServerError>(*e));
  } else if (r->streamed && !r->sink_status.ok()) {
    err = r->sink_status;
  }

  if (err.ok()) {
    const auto lat = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - sent);
    s->latencies.Record(lat);
    if ((s->latency_samples.fetch_add(1, std::memory_order_relaxed) + 1) % 20000 == 0) s->latencies.Decay();
    ResultCallback callback;
    ResultSet rs;
    {
      MutexLock l(&mu);
      --outstanding;
      if (done) return;  // a hedge lost the race
      done = true;
      if (hedge_timer) hedge_timer->cancel();
      if (retry_timer) retry_timer->cancel();
      callback = std::move(cb);
      rs.attempts = started;
    }
    if (IsHedge(execution)) s->counters.hedge_wins++;
    rs.winning_execution = execution;
    rs.host = host->endpoint();
    Reply& rep = *r;
    rs.warnings = std::move(rep.warnings);
    if (rep.streamed) {
      rs.streamed = true;
      rs.streamed_metadata = std::move(rep.rows_metadata);
      rs.streamed_row_count = rep.row_count;
      rs.result = cql::Rows();
    } else if (auto* res = std::get_if<cql::Result>(&rep.response->message)) {
      rs.result = std::move(*res);
      if (auto* rows = std::get_if<cql::Rows>(&rs.result); rows && st.prepared &&
                                                           rows->metadata().columns.empty() &&
                                                           !st.prepared->result_metadata.columns.empty()) {
        rows->set_metadata_columns(st.prepared->result_metadata.columns);
      }
    } else {
      callback(Status::ProtocolError(fmt::format("{} answered with an unexpected {} message", rs.host,
                                                 cql::OpcodeName(rep.header.opcode))));
      return;
    }
    callback(std::move(rs));
    return;
  }

  // A failed execution.
  {
    MutexLock l(&mu);
    --outstanding;
    if (done) return;
    last_error = err;
    ++failures;
    // Other executions (hedges) are still running: let them finish first.
    if (outstanding > 0) return;
  }
  Retry(err, host);
}

void Execution::Retry(const Status& err, const HostPtr& host) {
  RetryDecision d;
  int attempts;
  size_t idx = 0;
  {
    MutexLock l(&mu);
    if (done) return;
    d = retry->OnError(err, st.idempotent, failures);
    attempts = started;
    if (d.kind == RetryDecision::Kind::kNextHost) {
      idx = ++next_host;
    } else if (d.kind == RetryDecision::Kind::kSameHost) {
      idx = next_host;
    }
  }
  if (d.kind == RetryDecision::Kind::kGiveUp) {
    return Fail(Status(err.code(),
                       fmt::format("{} ({} attempt{}, last on {})", err.message(), attempts,
                                   attempts == 1 ? "" : "s", host->endpoint()),
                       err.server_error_ptr()));
  }
  s->counters.retries++;
  if (d.delay.count() <= 0) return Attempt(idx, false);
  MutexLock l(&mu);
  if (done) return;
  retry_timer = std::make_unique<asio::steady_timer>(s->io->Next());
  retry_timer->expires_after(d.delay);
  auto self = shared_from_this();
  retry_timer->async_wait([self, idx](std::error_code ec) {
    if (ec) return;
    self->Attempt(idx, false);
  });
}

void Execution::Reprepare(int execution, const HostPtr& host, std::shared_ptr<Connection> conn) {
  s->counters.reprepares++;
  auto self = shared_from_this();
  conn->Send(cql::EncodePrepare(st.prepared->query), nullptr, timeout,
             [self, execution, host, conn](StatusOr<Reply> r) {
               Status err;
               if (!r.ok()) {
                 err = r.status();
               } else if (const ServerError* e = r->server_error()) {
                 err = Status::FromServer(std::make_shared<ServerError>(*e));
               } else {
                 auto* res = r->response ? std::get_if<cql::Result>(&r->response->message) : nullptr;
                 auto* p = res ? std::get_if<cql::Prepared>(res) : nullptr;
                 if (p == nullptr) {
                   err = Status::ProtocolError("PREPARE did not return a prepared result");
                 } else if (p->id != self->st.prepared->id) {
                   // The statement changed meaning (e.g. the table was recreated
                   // with other columns): the caller must prepare it again.
                   err = Status::InvalidArgument(fmt::format(
                       "statement '{}' was re-prepared with a different id; prepare it again",
                       self->st.prepared->query));
                 }
               }
               if (!err.ok()) {
                 return self->OnReply(execution, host, conn, Clock::now(), err);
               }
               // Same id: send the EXECUTE again on this connection.
               std::shared_ptr<cql::CellSink> sink = self->st.sink ? self->st.sink(execution) : nullptr;
               cql::RequestFrame f{self->frame.opcode, self->frame.bytes};
               const auto sent = Clock::now();
               conn->Send(std::move(f), std::move(sink), self->timeout,
                          [self, execution, host, conn, sent](StatusOr<Reply> r2) {
                            self->OnReply(execution, host, conn, sent, std::move(r2));
                          });
             });
}

// ============================================================================
// Session
// ============================================================================

namespace {

// The connect retry of the control connection: a connection that was
// accepted and then lost (or answered garbage, or not at all) may work the
// next time; refused connections, TLS and authentication failures will not.
constexpr int kControlOpenAttempts = 3;
const ExponentialBackoff kControlOpenBackoff(std::chrono::milliseconds(50), std::chrono::milliseconds(400));

bool WorthAnotherOpen(const Status& s) {
  return s.code() == Status::Code::kConnectionLost || s.code() == Status::Code::kTimeout ||
         s.code() == Status::Code::kProtocolError;
}

Status OpenControl(Session::Impl& impl) {
  Status s;
  for (int attempt = 0; attempt < kControlOpenAttempts; ++attempt) {
    std::promise<Status> ready;
    auto fut = ready.get_future();
    impl.control->Open([&ready](Status st) { ready.set_value(std::move(st)); });
    s = fut.get();
    if (s.ok() || !WorthAnotherOpen(s)) break;
    std::this_thread::sleep_for(kControlOpenBackoff.Delay(attempt + 1));
  }
  return s;
}

// Waits (bounded) until at least one pool connection is open and every up
// host's first open has settled (a connection, or an error), so that the
// first statements are not sent to hosts whose pools are still opening (they
// would fail over, and a non-idempotent one could fail).
Status AwaitPools(const Session::Impl& impl, std::chrono::milliseconds connect_timeout) {
  const auto until = Clock::now() + connect_timeout;
  const auto settle_until = Clock::now() + std::min<std::chrono::milliseconds>(connect_timeout,
                                                                                 std::chrono::milliseconds(2000));
  for (;;) {
    bool any = false, settled = true;
    std::string why;
    if (auto t = impl.Topo()) {
      for (auto& h : t->hosts) {
        const HostPool::State st = h->pool->state();
        if (st.open_connections > 0) any = true;
        if (h->up() && st.open_connections == 0 && st.last_error.empty()) settled = false;
        if (why.empty()) why = st.last_error;
      }
    }
    if (any && (settled || Clock::now() >= settle_until)) return Status::OK();
    if (Clock::now() >= until) {
      return Status::ConnectFailed(fmt::format("no connection to any host could be opened{}{}",
                                               why.empty() ? "" : ": ", why));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

StatusOr<std::shared_ptr<Session>> Session::Connect(const ConnectionOptions& options,
                                                    SessionOptions session_options) {
  CQLS_RETURN_IF_ERROR(options.Validate());
  auto impl = std::make_shared<Impl>();
  impl->opts = options;
  impl->conns_per_host = options.connections_per_host;
  impl->sopts = std::move(session_options);
  if (!impl->sopts.retry) impl->sopts.retry = std::make_shared<DefaultRetryPolicy>();
  if (!impl->sopts.load_balancing) impl->sopts.load_balancing = std::make_shared<DefaultLoadBalancingPolicy>();
  int threads = options.io_threads;
  if (threads == 0) threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  impl->io = std::make_unique<IoPool>(threads);
  if (options.tls) {
    auto ctx = MakeTlsContext(*options.tls);
    if (!ctx.ok()) return ctx.status();
    impl->tls = *ctx;
  }
  impl->control = ControlConnection::Make(impl->MakeControlConfig(), impl);
  Status s = OpenControl(*impl);
  if (s.ok()) s = AwaitPools(*impl, options.connect_timeout);
  if (!s.ok()) {
    impl->Shutdown();
    return s;
  }
  impl->WarnPlaintextCredentials();
  return std::shared_ptr<Session>(new Session(std::move(impl)));
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

Session::Session(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Session::~Session() { Close(); }

void Session::Close() {
  if (!impl_) return;
  if (impl_->io->InPoolThread()) {
    // Dropped from inside a callback: an I/O thread cannot join itself, so
    // a helper thread finishes the shutdown.
    std::thread([impl = impl_] { impl->Shutdown(); }).detach();
    return;
  }
  impl_->Shutdown();
}

namespace {

StatusOr<cql::RequestFrame> EncodeStatement(const Statement& st) {
  cql::QueryParameters qp;
  qp.consistency = st.consistency;
  qp.values = st.values;
  qp.page_size = st.page_size;
  qp.paging_state = st.paging_state;
  qp.default_timestamp = st.default_timestamp;
  if (st.prepared) {
    if (st.values.size() != st.prepared->bind_types.size()) {
      return Status::InvalidArgument(fmt::format("statement '{}' has {} bind markers but {} values were given",
                                                 st.prepared->query, st.prepared->bind_types.size(),
                                                 st.values.size()));
    }
    qp.value_types = &st.prepared->bind_types;
    qp.skip_metadata = !st.prepared->result_metadata.columns.empty();
    auto f = cql::EncodeExecute(st.prepared->id, qp);
    if (!f.ok()) return f.status().WithContext(st.prepared->query);
    return f;
  }
  if (st.query.empty()) return Status::InvalidArgument("statement has neither a query nor a prepared statement");
  auto f = cql::EncodeQuery(st.query, qp);
  if (!f.ok()) return f.status().WithContext(st.query);
  return f;
}

template <typename T>
StatusOr<T> Wait(std::future<StatusOr<T>>& f) {
  return f.get();
}

}  // namespace

// Starts an execution of an encoded request along the statement's plan.
static void Run(const std::shared_ptr<Session::Impl>& impl, const Statement& st, cql::RequestFrame frame,
                ResultCallback callback) {
  auto ex = std::make_shared<Execution>();
  ex->s = impl;
  ex->st = st;
  ex->frame = std::move(frame);
  ex->cb = std::move(callback);
  ex->plan = impl->QueryPlan(st, &ex->token);
  ex->retry = (st.retry ? st.retry : impl->sopts.retry.get())->NewSession();
  ex->spec = st.speculative ? st.speculative : impl->sopts.speculative.get();
  ex->timeout = st.timeout.count() > 0 ? st.timeout : impl->opts.request_timeout;
  impl->counters.requests++;
  if (ex->plan.empty()) {
    impl->counters.errors++;
    auto cb = std::move(ex->cb);
    return cb(Status::ConnectFailed(st.target_host.empty()
                                        ? std::string("no host of the cluster is known")
                                        : fmt::format("host {} is not part of the cluster", st.target_host)));
  }
  ex->Attempt(0, false);
}

void Session::ExecuteAsync(Statement statement, ResultCallback callback) {
  if (impl_->closed()) return callback(Status::Cancelled("session closed"));
  auto frame = EncodeStatement(statement);
  if (!frame.ok()) return callback(frame.status());
  Run(impl_, statement, std::move(*frame), std::move(callback));
}

StatusOr<ResultSet> Session::Execute(Statement statement) {
  if (impl_->io->InPoolThread()) {
    return Status::Internal("Session::Execute called from an I/O thread (use ExecuteAsync)");
  }
  std::promise<StatusOr<ResultSet>> p;
  auto f = p.get_future();
  ExecuteAsync(std::move(statement), [&p](StatusOr<ResultSet> r) { p.set_value(std::move(r)); });
  return Wait(f);
}

StatusOr<ResultSet> Session::Query(std::string query, std::vector<Value> values) {
  return Execute(Statement::Query(std::move(query), std::move(values)));
}

Status Session::ForEachPage(Statement statement, const std::function<Status(const cql::Rows&)>& on_page) {
  if (statement.sink) return Status::InvalidArgument("ForEachPage needs a buffered statement (no sink)");
  for (;;) {
    auto r = Execute(statement);
    if (!r.ok()) return r.status();
    const cql::Rows* rows = r->rows();
    if (rows == nullptr) return Status::InvalidArgument("statement returned no rows result");
    CQLS_RETURN_IF_ERROR(on_page(*rows));
    auto next = r->paging_state();
    if (!next) return Status::OK();
    statement.paging_state = std::move(next);
  }
}

void Session::PrepareAsync(std::string query, PrepareCallback callback) {
  {
    MutexLock l(&impl_->prepared_mu);
    auto it = impl_->prepared.find(query);
    if (it != impl_->prepared.end()) return callback(it->second);
  }
  if (impl_->closed()) return callback(Status::Cancelled("session closed"));
  Statement st = Statement::Query(query);
  st.idempotent = true;
  auto impl = impl_;
  Run(impl_, st, cql::EncodePrepare(query),
      [impl, query, callback = std::move(callback)](StatusOr<ResultSet> r) {
        if (!r.ok()) return callback(r.status().WithContext(fmt::format("prepare '{}'", query)));
        auto* p = std::get_if<cql::Prepared>(&r->result);
        if (p == nullptr) return callback(Status::ProtocolError("PREPARE did not return a prepared result"));
        auto ps = std::make_shared<PreparedStatement>();
        ps->query = query;
        ps->id = p->id;
        ps->bind_columns = p->bind_metadata.bind_columns;
        for (const auto& c : ps->bind_columns) ps->bind_types.push_back(c.type);
        ps->pk_indexes = p->bind_metadata.pk_indexes;
        ps->result_metadata = p->result_metadata;
        if (!ps->bind_columns.empty()) {
          ps->keyspace = ps->bind_columns.front().keyspace;
          ps->table = ps->bind_columns.front().table;
        } else if (!ps->result_metadata.columns.empty()) {
          ps->keyspace = ps->result_metadata.columns.front().keyspace;
          ps->table = ps->result_metadata.columns.front().table;
        }
        PreparedPtr out = ps;
        {
          MutexLock l(&impl->prepared_mu);
          auto [it, inserted] = impl->prepared.emplace(query, out);
          if (!inserted) it->second = out;  // a newer preparation replaces the old one
        }
        callback(std::move(out));
      });
}

StatusOr<PreparedPtr> Session::Prepare(std::string query) {
  if (impl_->io->InPoolThread()) return Status::Internal("Session::Prepare called from an I/O thread");
  std::promise<StatusOr<PreparedPtr>> p;
  auto f = p.get_future();
  PrepareAsync(std::move(query), [&p](StatusOr<PreparedPtr> r) { p.set_value(std::move(r)); });
  return Wait(f);
}

void Session::ExecuteBatchAsync(cql::BatchType type, const std::vector<Statement>& statements,
                                cql::Consistency consistency, ResultCallback callback) {
  if (statements.empty()) return callback(Status::InvalidArgument("empty batch"));
  std::vector<cql::BatchStatement> bs;
  bs.reserve(statements.size());
  bool idempotent = true;
  for (const auto& st : statements) {
    cql::BatchStatement b;
    if (st.prepared) {
      if (st.values.size() != st.prepared->bind_types.size()) {
        return callback(Status::InvalidArgument(fmt::format(
            "batch statement '{}' has {} bind markers but {} values were given", st.prepared->query,
            st.prepared->bind_types.size(), st.values.size())));
      }
      b.prepared_id = st.prepared->id;
      b.value_types = &st.prepared->bind_types;
    } else {
      b.query = st.query;
    }
    b.values = st.values;
    idempotent = idempotent && st.idempotent;
    bs.push_back(std::move(b));
  }
  auto frame = cql::EncodeBatch(type, bs, consistency);
  if (!frame.ok()) return callback(frame.status());
  Statement route = statements.front();
  route.idempotent = idempotent;
  route.consistency = consistency;
  route.sink = nullptr;
  Run(impl_, route, std::move(*frame), std::move(callback));
}

StatusOr<ResultSet> Session::ExecuteBatch(cql::BatchType type, const std::vector<Statement>& statements,
                                          cql::Consistency consistency, std::chrono::milliseconds timeout) {
  if (impl_->io->InPoolThread()) return Status::Internal("Session::ExecuteBatch called from an I/O thread");
  (void)timeout;  // the statements' own timeout applies (first statement)
  std::promise<StatusOr<ResultSet>> p;
  auto f = p.get_future();
  ExecuteBatchAsync(type, statements, consistency, [&p](StatusOr<ResultSet> r) { p.set_value(std::move(r)); });
  return Wait(f);
}

Status Session::WaitForSchemaAgreement(std::chrono::milliseconds timeout) {
  // Every up host is asked for its own schema version (system.local), on its
  // own connections. Reading system.peers on the control connection instead
  // is not enough: right after a DDL coordinated by another node, the control
  // node and its gossip view of the peers can all still report the *old*
  // version and "agree" before the change has reached them (a 3-node test
  // then failed with "table does not exist" on a write right after CREATE
  // TABLE). The DDL's coordinator already has the new version, so equal
  // versions on every up host mean the change is everywhere.
  const auto until = Clock::now() + timeout;
  std::string last;
  for (;;) {
    std::vector<std::string> hosts;
    if (auto t = impl_->Topo()) {
      for (auto& h : t->hosts) {
        if (h->up()) hosts.push_back(h->address);
      }
    }
    std::set<std::string> versions;
    std::string failed;
    for (const auto& h : hosts) {
      Statement st = Statement::Query(kSchemaVersionQuery);
      st.target_host = h;
      st.idempotent = true;
      st.timeout = std::chrono::milliseconds(2000);
      st.page_size = 0;
      auto r = Execute(std::move(st));
      StatusOr<std::string> v = !r.ok()            ? StatusOr<std::string>(r.status())
                                : r->rows() == nullptr ? Status::ProtocolError("no rows result")
                                                       : ParseSchemaVersion(*r->rows());
      if (!v.ok()) {
        failed = fmt::format("{}: {}", h, v.status().ToString());
        break;
      }
      versions.insert(std::move(*v));
    }
    if (hosts.empty()) {
      last = "no host is up";
    } else if (!failed.empty()) {
      last = failed;
    } else if (versions.size() == 1) {
      return Status::OK();
    } else {
      last = fmt::format("{} schema versions among {} up hosts", versions.size(), hosts.size());
    }
    if (Clock::now() >= until) {
      return Status::Timeout(fmt::format("no schema agreement within {} ms ({})", timeout.count(), last));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::string Session::cluster_name() const {
  auto t = impl_->Topo();
  return t ? t->cluster_name : std::string();
}

std::string Session::local_dc() const { return impl_->LocalDc(); }

std::vector<HostInfo> Session::Hosts() const {
  std::vector<HostInfo> out;
  auto t = impl_->Topo();
  if (!t) return out;
  for (const auto& h : t->hosts) {
    HostInfo i;
    i.address = h->address;
    i.port = h->port;
    i.datacenter = h->datacenter;
    i.rack = h->rack;
    i.release_version = h->release_version;
    i.host_id = h->host_id;
    i.token_count = h->tokens.size();
    i.up = h->up();
    const HostPool::State st = h->pool->state();
    i.open_connections = st.open_connections;
    i.in_flight = st.in_flight;
    i.shards = st.shards;
    out.push_back(std::move(i));
  }
  return out;
}

SessionMetrics Session::metrics() const {
  SessionMetrics m;
  auto& c = impl_->counters;
  m.requests = c.requests;
  m.executions = c.executions;
  m.retries = c.retries;
  m.hedges = c.hedges;
  m.hedge_wins = c.hedge_wins;
  m.timeouts = c.timeouts;
  m.errors = c.errors;
  m.reprepares = c.reprepares;
  m.reconnects = c.reconnects;
  m.bytes_read = impl_->closed_bytes_read;
  m.bytes_written = impl_->closed_bytes_written;
  m.direct_bytes = impl_->closed_direct;
  m.copied_bytes = impl_->closed_copied;
  if (auto t = impl_->Topo()) {
    for (const auto& h : t->hosts) {
      h->pool->ForEachConnection([&m](const Connection& conn) {
        ConnectionStats s = conn.stats();
        m.bytes_read += s.bytes_read;
        m.bytes_written += s.bytes_written;
        m.direct_bytes += s.direct_bytes;
        m.copied_bytes += s.copied_bytes;
        m.in_flight += conn.in_flight();
      });
    }
  }
  return m;
}

const LatencyTracker& Session::latencies() const { return impl_->latencies; }
const ConnectionOptions& Session::options() const { return impl_->opts; }

int Session::InFlight() const { return metrics().in_flight; }

void Session::SetConnectionsPerHost(int n) {
  n = std::clamp(n, 1, 64);
  if (impl_->conns_per_host.exchange(n) == n) return;
  if (auto t = impl_->Topo()) {
    for (auto& h : t->hosts) h->pool->Fill();
  }
}

int Session::ConnectionsPerHost() const { return impl_->conns_per_host.load(); }

}  // namespace cqlstream::net
