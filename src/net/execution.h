// Copyright (c) cqlstream authors.
//
// Execution: one statement on its way through the cluster, private to
// src/net. It walks the query plan the load-balancing policy made for it:
// an attempt goes to the first host of the plan (from its position) with an
// open connection; a failed attempt asks the statement's RetrySession
// (give up, same host, next host, after a delay); UNPREPARED is answered by
// re-preparing on that connection and sending again; an idempotent statement
// may be hedged when its SpeculativePolicy says so (another execution on the
// next host, or another connection of the same host). The first answer
// wins; later ones are dropped; failures wait for the executions still
// running before they are retried.
//
// Thread-safety: an Execution's mutable state is under its own mutex; its
// callbacks run on the session's I/O threads and never block; the callback
// of the statement runs exactly once, without the lock held.
// Ownership: shared by its in-flight sends and timers; it holds the
// session's Impl until it completes.
#ifndef CQLSTREAM_NET_EXECUTION_H_
#define CQLSTREAM_NET_EXECUTION_H_

#include <asio.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "net/session_impl.h"
#include "util/mutex.h"

namespace cqlstream::net {

struct Execution : std::enable_shared_from_this<Execution> {
  std::shared_ptr<Session::Impl> s;
  Statement st;
  // The encoded request (stream id 0), shared by every attempt and hedge.
  std::shared_ptr<const cql::RequestFrame> frame;
  ResultCallback cb;
  std::vector<HostPtr> plan;
  std::optional<int64_t> token;
  std::unique_ptr<RetrySession> retry;
  const SpeculativePolicy* spec = nullptr;
  std::chrono::milliseconds timeout{0};

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
  // The sink of one execution: the statement's, behind a ColumnCheckingSink
  // when it checks its result columns; nullptr for a buffered statement.
  std::shared_ptr<cql::CellSink> MakeSink(int execution, const HostPtr& host) const;
  void OnReply(int execution, const HostPtr& host, std::shared_ptr<Connection> conn,
               std::chrono::steady_clock::time_point sent, StatusOr<Reply> r);
  void Fail(Status why);  // takes mu
  void ArmHedge();
  void Reprepare(int execution, const HostPtr& host, std::shared_ptr<Connection> conn);
  void Retry(const Status& err, const HostPtr& host);
};

// Starts an execution of an encoded request along the statement's plan;
// `callback` runs once with the outcome.
void Run(const std::shared_ptr<Session::Impl>& impl, const Statement& st, cql::RequestFrame frame,
         ResultCallback callback);

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_EXECUTION_H_
