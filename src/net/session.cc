// Copyright (c) cqlstream authors.
#include "net/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <set>
#include <thread>

#include "net/execution.h"
#include "net/fd_budget.h"
#include "net/session_impl.h"
#include "net/system_tables.h"

namespace cqlstream::net {

using Clock = std::chrono::steady_clock;

std::optional<cql::Bytes> ResultSet::paging_state() const {
  if (streamed) return streamed_metadata.paging_state;
  if (const cql::Rows* r = rows()) return r->metadata().paging_state;
  return std::nullopt;
}

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

bool IsSet(const std::atomic<bool>* flag) { return flag != nullptr && flag->load(std::memory_order_relaxed); }

// Starts an asynchronous call (`start` is given its callback, which keeps
// the promise: it may run after the caller has given up) and waits for its
// result, or gives up with Cancelled("interrupted") once *a or *b is set
// (before the call starts, too; looked at every Session::kStopPoll). The
// one blocking shape of Connect's control open, Execute, Prepare and
// ExecuteBatch.
template <typename R, typename Start>
R CallUnlessStopped(Start&& start, const std::atomic<bool>* a, const std::atomic<bool>* b = nullptr) {
  if (IsSet(a) || IsSet(b)) return Status::Cancelled("interrupted");
  auto p = std::make_shared<std::promise<R>>();
  std::future<R> f = p->get_future();
  start([p](R r) { p->set_value(std::move(r)); });
  if (a == nullptr && b == nullptr) return f.get();
  while (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    if (IsSet(a) || IsSet(b)) return Status::Cancelled("interrupted");
    f.wait_for(Session::kStopPoll);
  }
  return f.get();
}

// Sleeps `d`, or less once *stop is set; false then.
bool SleepUnlessStopped(std::chrono::milliseconds d, const std::atomic<bool>* stop) {
  const auto until = Clock::now() + d;
  for (;;) {
    if (IsSet(stop)) return false;
    const auto now = Clock::now();
    if (now >= until) return true;
    std::this_thread::sleep_for(std::min<Clock::duration>(until - now, Session::kStopPoll));
  }
}

Status OpenControl(Session::Impl& impl, const std::atomic<bool>* stop) {
  Status s;
  for (int attempt = 0; attempt < kControlOpenAttempts; ++attempt) {
    s = CallUnlessStopped<Status>([&](auto done) { impl.control->Open(std::move(done)); }, stop);
    if (s.ok() || !WorthAnotherOpen(s)) break;
    if (!SleepUnlessStopped(kControlOpenBackoff.Delay(attempt + 1), stop)) return Status::Cancelled("interrupted");
  }
  return s;
}

// Waits (bounded) until at least one pool connection is open and every up
// host's first open has settled (a connection, or an error), so that the
// first statements are not sent to hosts whose pools are still opening (they
// would fail over, and a non-idempotent one could fail).
Status AwaitPools(const Session::Impl& impl, std::chrono::milliseconds connect_timeout,
                  const std::atomic<bool>* stop) {
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
    if (IsSet(stop)) return Status::Cancelled("interrupted");
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
  // The stop lives in impl->stop (SetStop replaces it); this call holds its own.
  const std::shared_ptr<const std::atomic<bool>> held_stop = std::move(session_options.stop);
  const std::atomic<bool>* stop = held_stop.get();
  if (IsSet(stop)) return Status::Cancelled("interrupted");
  auto impl = std::make_shared<Impl>();
  impl->opts = options;
  impl->conns_per_host = options.connections_per_host;
  impl->sopts = std::move(session_options);
  {
    MutexLock l(&impl->stop_mu);
    impl->stop = held_stop;
  }
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
  Status s = OpenControl(*impl, stop);
  if (s.ok()) s = AwaitPools(*impl, options.connect_timeout, stop);
  if (!s.ok()) {
    impl->Shutdown();
    return s;
  }
  impl->WarnPlaintextCredentials();
  return std::shared_ptr<Session>(new Session(std::move(impl)));
}

Session::Session(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Session::~Session() { Close(); }

void Session::SetStop(std::shared_ptr<const std::atomic<bool>> stop) {
  MutexLock l(&impl_->stop_mu);
  impl_->stop = std::move(stop);
}

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
    qp.skip_metadata = !st.prepared->result_metadata.columns.empty() && !st.check_result_columns;
    auto f = cql::EncodeExecute(st.prepared->id, qp);
    if (!f.ok()) return f.status().WithContext(st.prepared->query);
    return f;
  }
  if (st.query.empty()) return Status::InvalidArgument("statement has neither a query nor a prepared statement");
  auto f = cql::EncodeQuery(st.query, qp);
  if (!f.ok()) return f.status().WithContext(st.query);
  return f;
}

}  // namespace

void Session::ExecuteAsync(Statement statement, ResultCallback callback) {
  if (impl_->closed()) return callback(Status::Cancelled("session closed"));
  auto frame = EncodeStatement(statement);
  if (!frame.ok()) return callback(frame.status());
  if (statement.paging_state) {
    // A page must move on: the state it was sent back again would have
    // whoever follows the pages ask for the same page forever.
    callback = [sent = *statement.paging_state, callback = std::move(callback)](StatusOr<ResultSet> r) {
      if (r.ok()) {
        const std::optional<cql::Bytes> next = r->paging_state();
        if (next && *next == sent) {
          return callback(Status::ProtocolError(
              fmt::format("the server answered a page with the paging state it was asked to go on from ({} bytes): "
                          "a page that does not move on",
                          sent.size())));
        }
      }
      callback(std::move(r));
    };
  }
  Run(impl_, statement, std::move(*frame), std::move(callback));
}

StatusOr<ResultSet> Session::Execute(Statement statement) {
  // A sink's answer writes into the caller's memory: waited for to its end.
  std::shared_ptr<const std::atomic<bool>> stop = statement.sink ? nullptr : impl_->Stop();
  return ExecuteAndWait(std::move(statement), nullptr, std::move(stop));
}

StatusOr<ResultSet> Session::ExecuteAndWait(Statement statement, const std::atomic<bool>* stop,
                                            std::shared_ptr<const std::atomic<bool>> session_stop) {
  if (impl_->io->InPoolThread()) {
    return Status::Internal("Session::Execute called from an I/O thread (use ExecuteAsync)");
  }
  return CallUnlessStopped<StatusOr<ResultSet>>(
      [&](auto done) { ExecuteAsync(std::move(statement), std::move(done)); }, stop, session_stop.get());
}

StatusOr<ResultSet> Session::Execute(Statement statement, const std::atomic<bool>* stop) {
  if (stop == nullptr) return Execute(std::move(statement));
  // A sink writes into the caller's memory, which an abandoned request
  // would outlive.
  if (statement.sink) return Status::InvalidArgument("Execute with a stop flag needs a buffered statement (no sink)");
  return ExecuteAndWait(std::move(statement), stop, impl_->Stop());
}

StatusOr<ResultSet> Session::Query(std::string query, std::vector<Value> values) {
  return Execute(Statement::Query(std::move(query), std::move(values)));
}

Status Session::ReadBudget::Take(int64_t more_rows, int64_t more_bytes) {
  const bool too_many = more_rows > max_rows - rows;
  if (too_many || more_bytes > max_bytes - bytes) {
    return Status::Unsupported(
        fmt::format("{} answered more than {}, the most cqlstream keeps of it (or the server pages without end)", what,
                    too_many                     ? fmt::format("{} rows", max_rows)
                    : max_bytes % (1 << 20) == 0 ? fmt::format("{} MiB", max_bytes >> 20)
                                                 : fmt::format("{} bytes", max_bytes)));
  }
  rows += more_rows;
  bytes += more_bytes;
  return Status::OK();
}

Status Session::ForEachPage(Statement statement, const std::function<Status(const cql::Rows&)>& on_page) {
  ReadBudget unbounded = Unbounded();
  return ForEachPage(std::move(statement), on_page, &unbounded);
}

Status Session::ForEachPage(Statement statement, const std::function<Status(const cql::Rows&)>& on_page,
                            ReadBudget* budget, const std::atomic<bool>* stop) {
  if (statement.sink) return Status::InvalidArgument("ForEachPage needs a buffered statement (no sink)");
  int empty_in_a_row = 0;
  for (;;) {
    auto r = Execute(statement, stop);
    if (!r.ok()) return r.status();
    const cql::Rows* rows = r->rows();
    if (rows == nullptr) return Status::InvalidArgument("statement returned no rows result");
    CQLS_RETURN_IF_ERROR(budget->Take(rows->row_count(), rows->body_bytes()));
    CQLS_RETURN_IF_ERROR(on_page(*rows));
    auto next = r->paging_state();
    if (!next) return Status::OK();
    empty_in_a_row = rows->row_count() == 0 ? empty_in_a_row + 1 : 0;
    if (empty_in_a_row >= kMaxEmptyPagesInARow) {
      return Status::ProtocolError(
          fmt::format("{} pages in a row held no rows and each promised more (the server pages without end)",
                      empty_in_a_row));
    }
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
        callback(impl->RememberPrepared(query, *p));
      });
}

StatusOr<PreparedPtr> Session::Prepare(std::string query) {
  if (impl_->io->InPoolThread()) return Status::Internal("Session::Prepare called from an I/O thread");
  const std::shared_ptr<const std::atomic<bool>> stop = impl_->Stop();
  return CallUnlessStopped<StatusOr<PreparedPtr>>(
      [&](auto done) { PrepareAsync(std::move(query), std::move(done)); }, stop.get());
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
  const std::shared_ptr<const std::atomic<bool>> stop = impl_->Stop();
  return CallUnlessStopped<StatusOr<ResultSet>>(
      [&](auto done) { ExecuteBatchAsync(type, statements, consistency, std::move(done)); }, stop.get());
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
      // Interrupted (SessionOptions::stop), or the session closed.
      if (!r.ok() && r.status().code() == Status::Code::kCancelled) return r.status();
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
    if (!SleepUnlessStopped(std::chrono::milliseconds(100), impl_->Stop().get())) {
      return Status::Cancelled("interrupted");
    }
  }
}

std::string Session::cluster_name() const {
  auto t = impl_->Topo();
  return t ? t->cluster_name : std::string();
}

std::string Session::local_dc() const { return impl_->LocalDc(); }

int Session::IgnoredPeerRows() const {
  auto t = impl_->Topo();
  return t ? t->ignored_peers : 0;
}

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
  m.columns_decoded = c.columns_decoded;
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

uint64_t Session::ReplicaSetOf(const std::string& keyspace, int64_t token) const {
  return impl_->ReplicaSetOf(keyspace, token);
}

void Session::SetConnectionsPerHost(int n) {
  n = std::clamp(n, 1, 1024);  // as max_connections_per_host allows (the loader's own limit is lower)
  if (impl_->conns_per_host.exchange(n) == n) return;
  if (auto t = impl_->Topo()) {
    for (auto& h : t->hosts) h->pool->Fill();
  }
}

int Session::ConnectionsPerHost() const { return impl_->conns_per_host.load(); }

// The total is spread over the hosts whose pools are up (every pool is
// filled to the per-host number), and capped by what the process's
// descriptors allow (net/fd_budget.h).
int Session::SetTotalConnections(int total) {
  auto t = impl_->Topo();
  int up = 0, open = 0;
  if (t) {
    for (const auto& h : t->hosts) {
      const HostPool::State st = h->pool->state();
      open += st.open_connections;
      if (h->pool->up()) ++up;
    }
  }
  up = std::max(1, up);
  const int budget = ConnectionBudget(open);
  impl_->connection_budget.store(budget, std::memory_order_relaxed);
  total = std::clamp(total, 1, std::max(1, budget));
  const int per_host = std::max(1, std::min(total / up + (total % up != 0 ? 1 : 0), budget / up));
  SetConnectionsPerHost(per_host);
  return per_host;
}

int Session::ConnectionLimit() const {
  int limit = impl_->connection_budget.load(std::memory_order_relaxed);
  auto t = impl_->Topo();
  if (!t) return limit;
  int capped = 0, up = 0;
  for (const auto& h : t->hosts) {
    if (!h->pool->up()) continue;
    ++up;
    const int g = h->pool->growth_limit();
    if (g <= 0) return limit;  // this host still takes more
    capped += g;
  }
  return up > 0 ? std::min(limit, capped) : limit;
}

bool Session::ConnectionsShrink() const {
  auto t = impl_->Topo();
  if (!t) return false;
  for (const auto& h : t->hosts) {
    if (!h->pool->Shrinks()) return false;
  }
  return true;
}

}  // namespace cqlstream::net
