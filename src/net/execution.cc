// Copyright (c) cqlstream authors.
#include "net/execution.h"

#include <fmt/format.h>

#include <algorithm>

#include "net/result_columns.h"

namespace cqlstream::net {

using Clock = std::chrono::steady_clock;

std::shared_ptr<cql::CellSink> Execution::MakeSink(int execution, const HostPtr& host) const {
  if (!st.sink) return nullptr;
  std::shared_ptr<cql::CellSink> sink = st.sink(execution);
  if (!sink || !st.check_result_columns || !st.prepared) return sink;
  return std::make_shared<ColumnCheckingSink>(
      std::move(sink), st.prepared, host,
      std::shared_ptr<std::atomic<uint64_t>>(s, &s->counters.columns_decoded));
}

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
  std::shared_ptr<cql::CellSink> sink = MakeSink(execution, host);
  // Every attempt and hedge sends the same shared frame: an ingest's frames
  // carry ~100 kB blobs, and a copy per attempt was 11% of its client CPU.
  const auto sent = Clock::now();
  auto self = shared_from_this();
  conn->Send(frame, std::move(sink), timeout,
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
  } else if (!r->streamed && st.check_result_columns && st.prepared) {
    // A streamed answer's columns were checked by its ColumnCheckingSink;
    // a read that is answered without rows (Void, Set_keyspace, ...) is
    // answered for another statement.
    const auto* res = r->response ? std::get_if<cql::Result>(&r->response->message) : nullptr;
    const auto* rows = res ? std::get_if<cql::Rows>(res) : nullptr;
    if (rows != nullptr) {
      err = CheckResultColumns(*st.prepared, rows->metadata(), *host);
    } else if (res != nullptr && !st.prepared->result_metadata.columns.empty()) {
      err = Status::Corruption(fmt::format("{} answered '{}' with a result of no rows, not the {} it was prepared with",
                                           host->endpoint(), st.prepared->query,
                                           DescribeColumns(st.prepared->result_metadata)));
    }
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
                 } else if (!SameResultColumns(p->result_metadata, self->st.prepared->result_metadata)) {
                   // v4 ids hash the query text only: a table or type altered
                   // under the same text gives the same id but other result
                   // columns, which this statement's stale ones would misread
                   // (or, checked, refuse as another statement's). The session
                   // keeps the new preparation for the caller's next Prepare.
                   self->s->RememberPrepared(self->st.prepared->query, *p);
                   err = Status::InvalidArgument(fmt::format(
                       "statement '{}' was re-prepared with other result columns ({} instead of {}): the table or "
                       "a type changed; prepare it again",
                       self->st.prepared->query, DescribeColumns(p->result_metadata),
                       DescribeColumns(self->st.prepared->result_metadata)));
                 }
               }
               if (!err.ok()) {
                 return self->OnReply(execution, host, conn, Clock::now(), err);
               }
               // Same id: send the EXECUTE again on this connection.
               std::shared_ptr<cql::CellSink> sink = self->MakeSink(execution, host);
               const auto sent = Clock::now();
               conn->Send(self->frame, std::move(sink), self->timeout,
                          [self, execution, host, conn, sent](StatusOr<Reply> r2) {
                            self->OnReply(execution, host, conn, sent, std::move(r2));
                          });
             });
}

// Starts an execution of an encoded request along the statement's plan.
void Run(const std::shared_ptr<Session::Impl>& impl, const Statement& st, cql::RequestFrame frame,
                ResultCallback callback) {
  auto ex = std::make_shared<Execution>();
  ex->s = impl;
  ex->st = st;
  ex->frame = std::make_shared<const cql::RequestFrame>(std::move(frame));
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

}  // namespace cqlstream::net
