// Copyright (c) cqlstream authors.
//
// Session: cqlstream's CQL client for a whole cluster.
//
//  * Connect() opens a control connection to the first reachable contact
//    point, reads the topology (system.local + system.peers_v2, falling back
//    to system.peers), registers for TOPOLOGY_CHANGE / STATUS_CHANGE /
//    SCHEMA_CHANGE events and opens a pool of connections to every host of
//    the local data center (hosts of other data centers get pools too but are
//    tried last).
//  * Execute*() runs a statement along a query plan made by the session's
//    LoadBalancingPolicy (net/load_balancing.h; the default: for a prepared
//    statement whose partition key is bound, the replicas of its token
//    (Murmur3 on the routing key, replica placement from the keyspace's
//    replication) in the local DC, least busy first; then the other hosts of
//    the local DC; then remote DCs; without routing information the plan
//    starts round-robin). On ScyllaDB the request goes to the connection of
//    the token's shard.
//  * Failures go through the statement's RetryPolicy (default:
//    DefaultRetryPolicy); UNPREPARED is answered by re-preparing on that host
//    and re-sending. Idempotent statements may be hedged: a SpeculativePolicy
//    starts another execution on the next host (or another connection when
//    there is only one host) if the first has not answered; the first answer
//    wins and the others are abandoned.
//  * A host without an open connection (refused, killed, still opening)
//    leaves the query plan at once: an attempt goes to the next host of the
//    plan that has one, without spending a retry; a host whose connections
//    could not be opened is marked down (Hosts()) and tried last.
//  * Connections that die are re-opened in the background with exponential
//    backoff; hosts reported DOWN are tried last; events update the topology.
//
// The parts live beside this file: the connection pool of a host
// (net/pool.h), the control connection and its events (net/control.h), the
// query plan (net/load_balancing.h), one statement's attempts, retries and
// hedges (net/execution.h), the shared state (net/session_impl.h).
//  * Credentials (ConnectionOptions::username/password) are sent to every
//    host the session connects to: the contact points and every peer the
//    cluster names in system.peers(_v2). Without TLS they cross the network
//    in clear text: a session warns once on stderr when that happens to a
//    host that is not a loopback address.
//
// Thread-safety: every method is thread-safe. Async callbacks run on one of
// the session's I/O threads and must not block; the synchronous variants
// must not be called from an I/O thread (they would deadlock; checked).
// Ownership: Connect() returns a shared_ptr; Close() (or the last reference
// going away) stops the I/O threads after failing what is still pending.
#ifndef CQLSTREAM_NET_SESSION_H_
#define CQLSTREAM_NET_SESSION_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "cql/frame_decoder.h"
#include "cql/request.h"
#include "cql/response.h"
#include "cqlstream/options.h"
#include "cqlstream/status.h"
#include "cqlstream/value.h"
#include "net/policies.h"

namespace cqlstream::net {

class LoadBalancingPolicy;  // net/load_balancing.h

struct PreparedStatement {
  std::string query;
  cql::Bytes id;
  std::vector<cql::ColumnSpec> bind_columns;
  std::vector<DataType> bind_types;
  std::vector<uint16_t> pk_indexes;  // bind index of each partition-key component
  cql::RowsMetadata result_metadata;
  std::string keyspace;              // of the bound table (routing)
  std::string table;
};
using PreparedPtr = std::shared_ptr<const PreparedStatement>;

// Makes the CellSink for one execution (attempt or hedge) of a statement:
// concurrent executions of one statement never share a sink.
using SinkFactory = std::function<std::shared_ptr<cql::CellSink>(int execution)>;

struct Statement {
  // Exactly one of `query` (unprepared) and `prepared`.
  std::string query;
  PreparedPtr prepared;
  std::vector<Value> values;
  cql::Consistency consistency = cql::Consistency::kLocalOne;
  int32_t page_size = 5000;               // <= 0: no paging
  std::optional<cql::Bytes> paging_state;
  bool idempotent = false;                // reads and our blob writes are
  std::chrono::milliseconds timeout{0};   // per attempt; 0: the session's default
  std::optional<int64_t> default_timestamp;  // microseconds
  // Stream the Rows of the result into sinks made by this factory.
  SinkFactory sink;
  // Prepared statements only: ask for the result metadata (no skip_metadata)
  // and refuse, as a Corruption the caller may retry, an answer whose columns
  // are not the ones the statement was prepared with (net/result_columns.h).
  // For reads whose answers another statement's rows could pass for. A
  // streamed answer whose column specs are the PREPARED answer's bytes is
  // not decoded into names and types: its sink and streamed_metadata see
  // specs_matched and no columns, as after skip_metadata.
  bool check_result_columns = false;
  // Policies for this statement; nullptr: the session's defaults.
  const RetryPolicy* retry = nullptr;
  const SpeculativePolicy* speculative = nullptr;
  // Start the query plan at its n-th local replica (wrapping; at its n-th
  // host when the statement has no replicas): callers that retry or hedge
  // themselves use it to reach another replica (net/load_balancing.h).
  int plan_offset = 0;
  // Run only on this host (its address as in HostInfo::address); no failover.
  std::string target_host;
  // Routing for unprepared statements (prepared ones route themselves).
  std::optional<cql::Bytes> routing_key;
  std::string routing_keyspace;

  static Statement Query(std::string q, std::vector<Value> v = {}) {
    Statement s;
    s.query = std::move(q);
    s.values = std::move(v);
    return s;
  }
  static Statement Bound(PreparedPtr p, std::vector<Value> v = {}) {
    Statement s;
    s.prepared = std::move(p);
    s.values = std::move(v);
    return s;
  }
};

struct ResultSet {
  // The RESULT kind: Void, Rows, SetKeyspace, Prepared or SchemaChange.
  // For streamed Rows this holds an empty cql::Rows; see `streamed`.
  cql::Result result;
  bool streamed = false;
  // The answer's metadata (paging state); `columns` is empty when the
  // statement skipped the metadata or its checked specs matched as bytes.
  cql::RowsMetadata streamed_metadata;
  int32_t streamed_row_count = 0;
  int winning_execution = 0;   // which execution (sink) produced the answer
  std::string host;            // the host that answered
  int attempts = 1;            // executions started (retries + hedges + 1)
  std::vector<std::string> warnings;

  // The Rows of a buffered result, or nullptr.
  const cql::Rows* rows() const { return std::get_if<cql::Rows>(&result); }
  // Paging state for the next page, if any.
  std::optional<cql::Bytes> paging_state() const;
};

using ResultCallback = std::function<void(StatusOr<ResultSet>)>;
using PrepareCallback = std::function<void(StatusOr<PreparedPtr>)>;

struct HostInfo {
  std::string address;  // as the client connects to it
  uint16_t port = 0;
  std::string datacenter;
  std::string rack;
  std::string release_version;
  std::string host_id;
  size_t token_count = 0;
  bool up = true;
  int open_connections = 0;
  int in_flight = 0;
  // ScyllaDB: shard count (0 on Cassandra).
  int shards = 0;
};

struct SessionMetrics {
  uint64_t requests = 0;       // statements executed
  uint64_t executions = 0;     // attempts sent (incl. retries and hedges)
  uint64_t retries = 0;
  uint64_t hedges = 0;
  uint64_t hedge_wins = 0;     // a hedge answered first
  uint64_t timeouts = 0;
  uint64_t errors = 0;         // statements that failed in the end
  uint64_t reprepares = 0;
  uint64_t reconnects = 0;
  // Streamed answers of statements that check their result columns whose
  // column specs were not the PREPARED answer's bytes, were decoded to be
  // compared name by name, and passed (net/result_columns.h); 0 where the
  // server encodes an answer's columns as it encoded the statement's.
  uint64_t columns_decoded = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  uint64_t direct_bytes = 0;   // cell bytes read straight into sink memory
  uint64_t copied_bytes = 0;
  int in_flight = 0;
};

struct SessionOptions {
  std::shared_ptr<const RetryPolicy> retry = std::make_shared<DefaultRetryPolicy>();
  std::shared_ptr<const SpeculativePolicy> speculative;  // nullptr: no hedging by default
  // The query plans; nullptr: DefaultLoadBalancingPolicy (net/load_balancing.h).
  std::shared_ptr<const LoadBalancingPolicy> load_balancing;
  // Events and reconnection; turn off for short-lived tools.
  bool watch_events = true;
  // The interrupt of an opening (null: none). Once *stop is set, Connect and
  // every call that waits on the caller's thread (Execute, Query,
  // ForEachPage, Prepare, ExecuteBatch, WaitForSchemaAgreement) give up
  // within kStopPoll with Cancelled("interrupted") (Connect once the
  // session's shutdown has closed what it opened and cancelled a TCP connect
  // or TLS handshake under way; only a name lookup under way runs to its end,
  // getaddrinfo being uninterruptible). Their requests go on, the answers dropped; a write cut short
  // (DDL, a claim) may still be applied by the server, so an opening that
  // writes clears the stop before it writes. A statement with a sink is
  // waited for to its end (its answer writes into the caller's memory; the
  // request timeout bounds it). A flag set before Connect connects nothing.
  // Shared, so that a wait on another thread never outlives the flag;
  // SetStop replaces it (an opening done: SetStop(nullptr)).
  std::shared_ptr<const std::atomic<bool>> stop;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  static StatusOr<std::shared_ptr<Session>> Connect(const ConnectionOptions& options,
                                                    SessionOptions session_options = {});
  ~Session();

  // --- statements -------------------------------------------------------
  // A statement that asks for the page after a paging state gets a
  // ProtocolError where the answer carries that same state again (a page
  // that does not move on: following it would never end); with a sink, the
  // page's cells have reached the sink by then.
  void ExecuteAsync(Statement statement, ResultCallback callback);
  StatusOr<ResultSet> Execute(Statement statement);
  // Execute, given up once *stop (or the session's SessionOptions::stop) is
  // set (looked at before sending and before each wait of at most
  // kStopPoll; an answer already in hand is returned): then
  // Cancelled("interrupted"), and the request goes on, its answer
  // dropped. A statement with a sink is refused (InvalidArgument): the
  // request would outlive the memory it writes to; its `speculative` and
  // `retry` policies must outlive the request, not only the call. A null
  // `stop`: Execute. `stop` is borrowed for the call.
  StatusOr<ResultSet> Execute(Statement statement, const std::atomic<bool>* stop);
  static constexpr std::chrono::milliseconds kStopPoll{50};
  // Unprepared query, consistency LOCAL_ONE unless given; convenience.
  StatusOr<ResultSet> Query(std::string query, std::vector<Value> values = {});
  // Runs all pages of a statement, calling `on_page` for each buffered page.
  // A ProtocolError after kMaxEmptyPagesInARow pages in a row without rows
  // that each promise more (a node may send one now and then: rows
  // filtered out, tombstones; not a hundred in a row).
  Status ForEachPage(Statement statement, const std::function<Status(const cql::Rows&)>& on_page);
  static constexpr int kMaxEmptyPagesInARow = 100;
  // What paged reads whose rows their caller keeps (a catalog, a schema
  // listing) may hand over in all: rows, and bytes of the pages' result
  // bodies. A server that pages rows without end, each page new, would
  // otherwise grow the caller's memory until it ran out. The caller owns it
  // and may pass one budget to several reads it bounds together; it is not
  // thread-safe (one read at a time).
  struct ReadBudget {
    std::string what;  // names the reads in the error: "the segments read of dataset 'x'"
    int64_t max_rows = 0;
    int64_t max_bytes = 0;
    int64_t rows = 0;   // handed over so far
    int64_t bytes = 0;
    // Counts `rows` and `bytes` more, or, where they would pass a bound,
    // counts nothing and returns Unsupported naming `what` and the bound.
    Status Take(int64_t more_rows, int64_t more_bytes);
  };
  // ForEachPage within `budget`: a page that would take the read past
  // either bound is not handed over, and the read ends with Unsupported
  // naming budget->what and the bound; each page's wait is given up once
  // *stop is set (Execute above; `stop` may be null). REQUIRES: budget !=
  // nullptr.
  Status ForEachPage(Statement statement, const std::function<Status(const cql::Rows&)>& on_page,
                     ReadBudget* budget, const std::atomic<bool>* stop = nullptr);
  // A budget that bounds nothing (for ForEachPage with a `stop` only).
  static ReadBudget Unbounded() { return ReadBudget{"", INT64_MAX, INT64_MAX}; }

  // Prepared statements are cached by query text (and re-prepared
  // transparently when a server forgets them).
  void PrepareAsync(std::string query, PrepareCallback callback);
  StatusOr<PreparedPtr> Prepare(std::string query);

  StatusOr<ResultSet> ExecuteBatch(cql::BatchType type, const std::vector<Statement>& statements,
                                   cql::Consistency consistency = cql::Consistency::kLocalOne,
                                   std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  void ExecuteBatchAsync(cql::BatchType type, const std::vector<Statement>& statements,
                         cql::Consistency consistency, ResultCallback callback);

  // Waits until every up host reports the same schema version (after DDL).
  Status WaitForSchemaAgreement(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // --- cluster ------------------------------------------------------------
  std::string cluster_name() const;
  std::string local_dc() const;
  std::vector<HostInfo> Hosts() const;
  // Rows of system.peers that the current topology left out, each naming a
  // host already listed (net/control.h BuildTopology): a node that lists
  // itself among its peers, a row written twice.
  int IgnoredPeerRows() const;
  SessionMetrics metrics() const;
  const LatencyTracker& latencies() const;
  const ConnectionOptions& options() const;
  // Requests currently in flight over all connections.
  int InFlight() const;
  // An id of the replicas, in the local data center, of the partitions of
  // `keyspace` whose token (net/routing/murmur3.h) is `token`: partitions
  // with the same id live on the same replicas, so one request to one of
  // them reads them all without a hop between nodes (net/topology.h
  // ReplicaIndex::ReplicaSet). 0 when the keyspace cannot be routed
  // (unknown, no tokens, a strategy not placed).
  uint64_t ReplicaSetOf(const std::string& keyspace, int64_t token) const;
  // Changes the number of connections kept per host (on ScyllaDB at least
  // one per shard); more are opened in the background, extra ones are
  // parked at once (no new requests) and closed after
  // PoolConfig::idle_close (net/pool.h) — not on ScyllaDB's shard-aware
  // pools (ConnectionsShrink()).
  void SetConnectionsPerHost(int n);
  int ConnectionsPerHost() const;
  // Asks for `total` connections in all: spread over the hosts that are up
  // (ceil(total / up hosts) each) and capped by the process's descriptors
  // (net/fd_budget.h: half the soft RLIMIT_NOFILE less the other open
  // descriptors). Returns the number per host it set.
  int SetTotalConnections(int total);
  // The most connections the session can hold now, all hosts together: the
  // descriptor budget, and, once every up host has refused a connection
  // (HostPool::growth_limit()), the sum of what they accepted.
  int ConnectionLimit() const;
  // Whether fewer connections per host take effect (extra ones parked): not
  // while a host's pool is shard-aware (ScyllaDB) or never closes a surplus
  // (HostPool::Shrinks()).
  bool ConnectionsShrink() const;

  // Replaces SessionOptions::stop (null: none); a wait already under way
  // goes on looking at the flag it began with.
  void SetStop(std::shared_ptr<const std::atomic<bool>> stop);

  // Fails what is pending with Cancelled and stops the I/O threads.
  void Close();

  struct Impl;

 private:
  explicit Session(std::shared_ptr<Impl> impl);
  // Execute, waiting until the answer comes or *stop or *session_stop is
  // set (either may be null).
  StatusOr<ResultSet> ExecuteAndWait(Statement statement, const std::atomic<bool>* stop,
                                     std::shared_ptr<const std::atomic<bool>> session_stop);
  // Shared with in-flight executions and timers, which may outlive a call.
  std::shared_ptr<Impl> impl_;
};

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_SESSION_H_
