// Copyright (c) cqlstream authors.
//
// The loader engine's private state (Loader::Impl), shared by its files:
//   loader_init.cc      setup: options, connection, sample set, memory, window
//   loader_requests.cc  the request side: issuing, launching, claiming the
//                       data, completions, retries, hedges (the pump thread)
//   loader_coalesced.cc coalesced reads: samples of one segment issued
//                       together share one request (loader/coalesce.h)
//   loader_attached.cc  the request side of attached datasets (store/attached.h):
//                       a sample's foreign key from the key snapshot, then
//                       its row in the foreign table, as one attempt
//   loader_foreign_group.cc  attached datasets: the rows of samples whose
//                       foreign keys are known, several to a request
//   loader.cc           the public Loader: Next, Fetch, checkpoints, metrics
// Batch assembly (slots, holes, compaction, hand-out order) is
// loader/batch_assembler.h, which does no I/O.
//
// One mutex (Impl::mu) guards all assembly state; it is taken by the I/O
// threads (cell destinations, completions), the consumer (Next, Fetch) and
// the pump thread (retries, hedges, window control). Requests are launched
// outside the lock.
//
// Life of a sample (a Task):
//   issued -> attempt 0 in flight
//   first data cell of some attempt -> that attempt OWNS the task: a slot is
//     reserved in a batch (once per task) and the attempt's cells land there
//   owner completes, bytes add up (and checksum, if asked) -> sample done
//   an attempt fails -> if it owned the task, ownership is released (the
//     slot stays reserved for the task); when no attempt is left, the task
//     is retried after a backoff on the next replica, or resolved as failed
//   a slow attempt -> one hedge (another replica / connection); whichever
//     attempt claims the data first owns it, the other's bytes are dropped
// A task is resolved exactly once (done, or failed: skipped/raised), which is
// what makes delivery exactly-once.
//
// Coalesced reads (loader/coalesce.h, loader_coalesced.cc): small samples
// of one segment issued by the same Refill share one request (a group). The
// group request is one attempt of each of its tasks (attempts and
// outstanding counted per task, as for a single read); its answer is handed
// row by row to each task's own AttemptSink, and every task is settled with
// its own status: a task the answer did not hold fails that attempt as
// missing and takes the normal retry path. Retries and hedges are always
// single-sample attempts.
// The window counts samples in flight (in_flight), not requests: a group
// of n keys takes n places of the window, and the controller sees n
// completions of one latency each. Its BDP cap (goodput x lowest latency /
// bytes per completion) is then in samples, which is what a grouped or a
// single read moves; requests in flight are window / keys per group, and
// CoalesceCap keeps groups at most a quarter of the window so that several
// requests stay in flight.
//
// Ownership: Impl owns the session, the epochs (and through them the batches
// under assembly) and the pump thread; a Task is shared by the attempts in
// flight for it (std::shared_ptr) and points at its Epoch, which outlives it
// while the loader is open (Close fails what is in flight first).
// Thread-safety: see mu below.
#ifndef CQLSTREAM_LOADER_LOADER_IMPL_H_
#define CQLSTREAM_LOADER_LOADER_IMPL_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "cqlstream/loader.h"
#include "loader/batch_assembler.h"
#include "loader/buffer_pool.h"
#include "loader/checkpoint.h"
#include "loader/coalesce.h"
#include "loader/foreign_group_sink.h"
#include "loader/foreign_key_cache.h"
#include "loader/congestion_gate.h"
#include "loader/hedge_budget.h"
#include "loader/hedge_watch.h"
#include "loader/packed_order.h"
#include "loader/plan.h"
#include "loader/window.h"
#include "net/policies.h"
#include "net/session.h"
#include "store/attached.h"
#include "store/attached_row.h"
#include "store/sample_row.h"
#include "util/mutex.h"

namespace cqlstream {

namespace loader_impl {

using Clock = std::chrono::steady_clock;

// The defaults of LoaderOptions' zero ("automatic") fields that the engine
// fills in; include/cqlstream/loader.h states the same numbers.
inline constexpr int kDefaultInitialWindow = 32;
inline constexpr int kDefaultMaxInFlight = 16384;
inline constexpr int kDefaultMaxAttempts = 64;
inline constexpr int kMaxAttemptsMissingOrCorrupt = 3;
inline constexpr std::chrono::milliseconds kDefaultRetryBudget{120000};
inline constexpr int64_t kMinDefaultMemoryBytes = int64_t{1} << 30;
inline constexpr int kDefaultMemoryBatches = 8;
// The sample size assumed for an attached dataset, whose catalog knows no sizes.
inline constexpr int64_t kAttachedSizeGuess = 128 << 10;
// The memory an attached dataset's loader keeps looked-up foreign keys in
// (loader/foreign_key_cache.h): about 2.7 million uuid keys of one split.
inline constexpr int64_t kForeignKeyCacheBytes = int64_t{64} << 20;
// Attached datasets: how far ahead of the issue keys are looked up (at
// least kLookAheadMin samples, or kLookAheadWindows windows: a lookup
// waits behind the window's requests at the node, so keys asked for one
// window ahead come back about when they are needed), and with how many
// requests in flight at most.
inline constexpr uint64_t kLookAheadMin = 1024;
inline constexpr uint64_t kLookAheadWindows = 4;
inline constexpr int kLookAheadRequests = 32;
// Attached datasets: the rows of samples whose keys are known are read
// several to a request (loader_foreign_group.cc) once this many samples were
// read and none was larger than loader::kCoalesceMaxSampleBytes: the
// catalog knows no sizes of an attached split, so the group limit follows
// the largest sample read so far.
inline constexpr int64_t kForeignGroupAfter = 32;
// The adaptive attempt timeout: kTimeoutP99Factor x the p99 latency within
// [kMinTimeout, kMaxTimeout]; kFirstTimeout until kTimeoutLatencies were seen.
inline constexpr int kTimeoutP99Factor = 8;
inline constexpr std::chrono::milliseconds kMinTimeout{2000}, kMaxTimeout{30000}, kFirstTimeout{10000};
inline constexpr uint64_t kTimeoutLatencies = 200;

// One epoch of the rank (or one Fetch call: number -1): its plan and the
// assembler of its batches. Guarded by Impl::mu.
struct Epoch {
  Epoch(int64_t number, loader::Permutation perm, loader::RankPlan plan, loader::BatchAssembler batches)
      : number(number), perm(perm), plan(std::move(plan)), batches(std::move(batches)) {}
  int64_t number;
  loader::Permutation perm;
  std::optional<loader::PackedOrder> packed;  // LoaderOptions::packed: the order (perm unused)
  loader::RankPlan plan;
  uint64_t next_seq = 0;  // the next sequence number to issue
  // Attached datasets: the keys of sequence numbers below this were asked
  // for ahead of their issue (LookAheadKeys).
  uint64_t keys_ahead = 0;
  loader::BatchAssembler batches;
  // A Fetch call given up while its reads were in flight (interrupted): the
  // last of them to end drops it from Impl::fetches.
  bool abandoned = false;

  bool AllIssued() const { return next_seq == batches.samples(); }
};

// One sample to read. Guarded by Impl::mu.
struct Task {
  Epoch* ep = nullptr;
  uint64_t seq = 0;
  SampleKey key = 0;
  int32_t pack = -1;             // packed reads: the pack of key's segment that holds it (-1: read alone)
  bool pack_fallback = false;    // its pack lacked it or held it damaged: read alone since, uncounted once
  loader::Slot slot;             // reserved by the first attempt that claims the data
  int64_t size = -1;             // the claimed size (every attempt must agree)
  int owner = -1;                // attempt that owns the slot
  store::ChunkPlacer placer;     // the owner's chunks so far
  store::SampleStatics statics;  // the owner's static columns
  int attempts = 0, failures = 0, outstanding = 0;
  int parked = 0;                // failed attempts whose completion waits (Impl::ParkWhileWriting)
  bool resolved = false;
  bool hedged = false;
  int hedge_attempt = -1;
  Clock::time_point first_failure{};
  // The first failure's status, named in the final error when the last one
  // is of another kind (a timeout, then a retry that finds no connection).
  Status first_error;
  // Attached datasets: the sample's foreign key, once the key snapshot gave
  // it (immutable for the snapshot: retries and hedges reuse it).
  std::unique_ptr<Value> foreign_key;
};

// How the samples of an attached dataset are read (set up by Init, then
// read-only).
struct AttachedReads {
  store::AttachedTable table;
  DataType key_type;
  std::string snapshot_table;  // "ks.k_<dataset>", for messages
  net::PreparedPtr key_stmt;   // KeyLookupCql: seg, idx -> key
  // KeyLookupManyCql: seg, list of idx -> (seg, idx, key) rows; null when
  // coalescing is off (LoaderOptions::coalesce 1).
  net::PreparedPtr key_group_stmt;
  struct Split {
    net::PreparedPtr data_stmt;  // DataReadCql on its table: key -> (key, data[, label])
    // DataReadManyCql: list of keys -> (key, data[, label]) rows; null when
    // coalescing is off (LoaderOptions::coalesce 1).
    net::PreparedPtr data_group_stmt;
    std::string keyspace;  // the table's (its replicas route a grouped read)
    int32_t columns = 2;   // of both reads' rows: key, data[, label]
    store::AttachedRowOptions row;
  };
  std::map<std::string, Split> splits;    // by the table read ("ks.table"): each segment's snapshot table
  std::map<int32_t, const Split*> by_seg;  // every committed segment's split
  // Keys looked up so far, for later epochs and Fetch (thread-safe itself).
  std::unique_ptr<loader::ForeignKeyCache> keys;
};

// One request to send: a new attempt (first, retry, hedge) or the next page
// of an attempt in progress.
struct Launch {
  enum class Kind { kFirst, kRetry, kHedge, kNextPage, kGroup, kLookAhead };

  static Launch First(std::shared_ptr<Task> t) { return Launch(Kind::kFirst, std::move(t), 0); }
  // `plan_offset`: which replica/connection of the query plan goes first.
  static Launch Retry(std::shared_ptr<Task> t, int plan_offset) {
    return Launch(Kind::kRetry, std::move(t), plan_offset);
  }
  static Launch Hedge(std::shared_ptr<Task> t, int plan_offset) {
    return Launch(Kind::kHedge, std::move(t), plan_offset);
  }
  // The page after `paging_state` of attempt `attempt`, on the connection
  // that served the previous page; `empty_pages`: the pages without rows
  // just before it.
  static Launch NextPage(std::shared_ptr<Task> t, int plan_offset, cql::Bytes paging_state, int attempt,
                         int empty_pages) {
    Launch l(Kind::kNextPage, std::move(t), plan_offset);
    l.paging_state = std::move(paging_state);
    l.attempt = attempt;
    l.empty_pages = empty_pages;
    return l;
  }

  // The first attempt of each of `tasks` (one segment, distinct keys), as
  // one coalesced request.
  static Launch Group(std::vector<std::shared_ptr<Task>> tasks) {
    Launch l(Kind::kGroup, nullptr, 0);
    l.group = std::move(tasks);
    return l;
  }

  // Attached datasets: a look-ahead lookup of these keys (one segment),
  // into the key cache; no sample's attempt (Impl::LookAheadKeys).
  static Launch LookAhead(std::vector<SampleKey> keys) {
    Launch l(Kind::kLookAhead, nullptr, 0);
    l.look_ahead = std::move(keys);
    return l;
  }

  bool new_attempt() const { return kind != Kind::kNextPage; }

  Kind kind;
  std::shared_ptr<Task> task;
  int plan_offset;
  std::optional<cql::Bytes> paging_state;  // kNextPage only
  int attempt = -1;                        // kNextPage only
  int empty_pages = 0;                     // kNextPage only
  std::vector<std::shared_ptr<Task>> group;  // kGroup only (task is null)
  std::vector<SampleKey> look_ahead;          // kLookAhead only (task is null)

 private:
  Launch(Kind k, std::shared_ptr<Task> t, int plan_offset) : kind(k), task(std::move(t)), plan_offset(plan_offset) {}
};

class AttemptSink;
class AttachedSink;


// The routing key and the token of the partition (seg, idx) of `k` (a
// composite key of two ints: the data table's, the key snapshot's, and a
// pack's (seg, pack)), so that a grouped request goes to a replica of its
// first key: an IN list has no single token (loader_coalesced.cc).
std::optional<cql::Bytes> RoutingKeyOf(SampleKey k);
std::optional<int64_t> TokenOf(SampleKey k);

}  // namespace loader_impl

struct Loader::Impl {
  using Clock = loader_impl::Clock;
  using Epoch = loader_impl::Epoch;
  using Task = loader_impl::Task;
  using Launch = loader_impl::Launch;
  using AttemptSink = loader_impl::AttemptSink;
  using AttachedSink = loader_impl::AttachedSink;
  using TaskGroups = loader::SegmentGrouper<std::shared_ptr<Task>>;

  explicit Impl(LoaderOptions opts);

  // Set up by Init, then read-only.
  LoaderOptions o;
  int rank = 0, world = 1;
  std::shared_ptr<net::Session> session;
  DatasetInfo ds;
  net::PreparedPtr read_stmt;
  net::PreparedPtr group_read_stmt;  // coalesced reads: seg, list of idx (null: off)
  bool all_coalescible = false;      // coalesced reads on, and every segment's samples may share requests
  net::PreparedPtr pack_read_stmt;   // packed reads: seg, pack, list of idx (null: off)
  std::shared_ptr<const loader::PackedLayout> packed_layout;  // LoaderOptions::packed (null: off)
  // A checkpoint's fingerprint: the sample set's, and the packed layout's.
  uint64_t order_fingerprint = 0;
  net::PreparedPtr path_stmt;
  std::unique_ptr<loader_impl::AttachedReads> attached;  // null for a native dataset
  std::string split;
  loader::SampleSource source;
  std::map<int32_t, int64_t> seg_max_size;  // the catalog's hints, per segment
  std::map<int32_t, int64_t> seg_count;     // committed samples, per segment
  net::NoRetryPolicy no_retry;
  std::shared_ptr<loader::MemoryAccount> account = std::make_shared<loader::MemoryAccount>();
  std::shared_ptr<loader::BufferPool> pool;
  int64_t budget = 0;
  net::LatencyTracker latencies;  // thread-safe itself

  // Guards the fields below and the assembly state reached through them
  // (Epoch, Task, batches before hand-out; the analysis cannot name mu from
  // those structs, so their contract is this comment).
  mutable Mutex mu;
  CondVar ready_cv;  // consumer waits
  CondVar pump_cv;   // pump thread waits
  bool started GUARDED_BY(mu) = false;
  bool closed GUARDED_BY(mu) = false;
  std::deque<std::unique_ptr<Epoch>> epochs GUARDED_BY(mu);  // consumer's epoch first
  int64_t next_epoch GUARDED_BY(mu) = 0;                     // number of the next epoch to create
  int64_t consumer_epoch GUARDED_BY(mu) = 0;
  bool all_done GUARDED_BY(mu) = false;
  int64_t in_flight GUARDED_BY(mu) = 0;            // tasks issued and not resolved
  int64_t in_flight_unslotted GUARDED_BY(mu) = 0;  // of which without a slot yet
  std::vector<std::unique_ptr<Epoch>> fetches GUARDED_BY(mu);  // Fetch() calls in progress
  struct Retry {
    Clock::time_point due;
    std::shared_ptr<Task> task;
    int plan_offset;
    bool operator>(const Retry& r) const { return due > r.due; }
  };
  std::priority_queue<Retry, std::vector<Retry>, std::greater<>> retries GUARDED_BY(mu);
  // Failed reads' completions put off while the frame decoder may still
  // write into a slot through one of their sinks (loader/destination_hold.h):
  // the pump runs each once none may (ParkWhileWriting, TakeResumable).
  struct Parked {
    std::vector<std::shared_ptr<Task>> tasks;  // the read's samples (Task::parked counts it)
    std::function<bool()> writing;
    std::function<void()> resume;
  };
  std::vector<Parked> parked GUARDED_BY(mu);
  using Watch = loader::HedgeWatch<std::weak_ptr<Task>>::Entry;
  loader::HedgeWatch<std::weak_ptr<Task>> watch GUARDED_BY(mu);  // attempts in issue order, for hedging
  loader::WindowController ctl GUARDED_BY(mu);
  // The count last sent to the session (SetTotalConnections): the pump sends
  // ctl's count whenever it differs, whoever changed it.
  int connections_asked GUARDED_BY(mu) = 0;
  loader::CongestionGate congestion GUARDED_BY(mu);  // which failed requests cut the window
  double avg_size GUARDED_BY(mu) = 0;       // EWMA of sample sizes
  loader::HedgeBudget hedge_budget GUARDED_BY(mu);  // refilled by completions x the hedges' win rate

  // Metrics. m_timeouts counts requests that timed out (a coalesced request
  // once, whatever number of samples it carried).
  int64_t m_images GUARDED_BY(mu) = 0, m_bytes GUARDED_BY(mu) = 0, m_batches GUARDED_BY(mu) = 0,
          m_retries GUARDED_BY(mu) = 0, m_hedges GUARDED_BY(mu) = 0, m_hedge_wins GUARDED_BY(mu) = 0,
          m_timeouts GUARDED_BY(mu) = 0, m_dupes GUARDED_BY(mu) = 0, m_skipped GUARDED_BY(mu) = 0,
          m_dropped GUARDED_BY(mu) = 0;
  int64_t m_coalesced_requests GUARDED_BY(mu) = 0, m_coalesced_samples GUARDED_BY(mu) = 0;
  int64_t m_packed_requests GUARDED_BY(mu) = 0, m_pack_fallbacks GUARDED_BY(mu) = 0;
  int64_t m_group_failures GUARDED_BY(mu) = 0;  // LoaderMetrics::group_failures
  int64_t m_key_lookups GUARDED_BY(mu) = 0;  // attached: key snapshot reads sent
  int look_ahead_in_flight GUARDED_BY(mu) = 0;  // attached: LookAheadKeys' requests
  // Attached: samples read so far and the largest payload among them (the
  // size limit of grouped foreign reads: kForeignGroupAfter).
  int64_t attached_read GUARDED_BY(mu) = 0;
  int64_t attached_max_size GUARDED_BY(mu) = 0;
  double m_stall_s GUARDED_BY(mu) = 0;
  double rate_images GUARDED_BY(mu) = 0, rate_bytes GUARDED_BY(mu) = 0;
  int64_t rate_last_images GUARDED_BY(mu) = 0, rate_last_bytes GUARDED_BY(mu) = 0;
  Clock::time_point rate_at GUARDED_BY(mu) = Clock::now();

  std::thread pump;

  // --- setup (loader_init.cc) -------------------------------------------
  Status Init();
  Status ResolveRank();
  Status Connect(const ConnectionOptions& co);
  Status LoadSampleSet();
  Status LoadSelection();
  Status PrepareStatements();
  Status LoadPacks();
  Status PrepareAttached();
  Status SizeMemory() REQUIRES(mu);
  // The catalog's mean sample size of the split (a guess for attached
  // datasets whose key snapshot knows no sizes).
  double CatalogMeanSize() const;
  int UpHosts() const;
  // The window the controller starts with: the option or the default, at
  // most a user's max_in_flight (the controller clamps the same way).
  int FirstWindow() const;
  // The connections, all hosts together, that the window starts with: at
  // least `per_host` on each up host, and with adaptive connections those
  // for 4x the initial window (WindowController::InitialConnections), at
  // most `max_per_host` on each. Init asks for them before the statements
  // are prepared, so that they open during those round trips.
  int StartConnections(int per_host, int max_per_host) const;
  // `start_connections`: StartConnections, all hosts together;
  // `max_connections`: per host.
  void ConfigureWindow(int start_connections, int max_connections) REQUIRES(mu);
  // An epoch over `ranges`; `resplit`: the rest of a resumed epoch re-split
  // over another world size (drop_last then cuts this rank's own part).
  std::unique_ptr<Epoch> MakeEpoch(int64_t number, std::vector<loader::PositionRange> ranges, int64_t base_batches,
                                   bool resplit) REQUIRES(mu);
  std::unique_ptr<Epoch> MakeFetch(const std::vector<SampleKey>& keys) REQUIRES(mu);
  loader::BatchAssembler::Options AssemblyOptions(int64_t epoch, bool ordered, int64_t base_batches) const;
  // A committed key of the dataset (any split).
  bool Committed(SampleKey k) const;
  store::SampleHints HintsFor(SampleKey k) const;
  int64_t BatchesFor(uint64_t n) const;

  // --- the request side (loader_requests.cc) ----------------------------
  void Refill(std::vector<Launch>* out) REQUIRES(mu);
  // --- coalesced reads (loader_coalesced.cc) ------------------------------
  // Whether `k` may share a request (a native dataset with coalescing on,
  // and k's segment holds small one-row samples).
  bool CoalescibleKey(SampleKey k) const;
  // The first attempt of `t`: into `g` when it may share a request (a full
  // group goes to `out`), else to `out` alone.
  void IssueFirst(std::shared_ptr<Task> t, TaskGroups* g, std::vector<Launch>* out) REQUIRES(mu);
  // The groups left in `g` (a group of one as a single read).
  void FlushGroups(TaskGroups* g, std::vector<Launch>* out) REQUIRES(mu);
  void LaunchGroup(Launch l) EXCLUDES(mu);
  void OnGroupDone(const std::vector<std::shared_ptr<Task>>& tasks, const std::vector<int>& attempts,
                   const std::shared_ptr<loader::CoalescedSink>& group,
                   const std::vector<std::shared_ptr<AttemptSink>>& sinks, Clock::time_point sent,
                   StatusOr<net::ResultSet> r) EXCLUDES(mu);
  bool OverBudget() REQUIRES(mu);
  Epoch* IssuingEpoch() REQUIRES(mu);
  void Start(std::vector<Launch> launches) EXCLUDES(mu);
  void LaunchOne(Launch l) EXCLUDES(mu);
  std::chrono::milliseconds AttemptTimeout() const;
  std::span<uint8_t> Destination(AttemptSink& s, int32_t size) EXCLUDES(mu);
  Status Claim(AttemptSink& s) REQUIRES(mu);
  Status ReserveSlot(Task& t, int64_t size) REQUIRES(mu);
  void OnAttemptDone(const std::shared_ptr<Task>& t, const std::shared_ptr<AttemptSink>& sink,
                     Clock::time_point sent, StatusOr<net::ResultSet> r) EXCLUDES(mu);
  Status CheckAnswer(AttemptSink& s) REQUIRES(mu);
  Status FinishSample(Task& t) REQUIRES(mu);
  // The end of attempt `attempt` of `t` (its last page): `err` OK completes
  // the sample, else the attempt's failure is accounted for.
  void Settle(const std::shared_ptr<Task>& t, int attempt, std::chrono::microseconds latency, const Status& err)
      REQUIRES(mu);
  void CompleteTask(Task& t) REQUIRES(mu);
  void FailTask(Task& t, const Status& err) REQUIRES(mu);
  // Drops `e` from fetches once it is an abandoned Fetch whose every sample
  // is resolved (its reads' ends touch nothing of it after that).
  void DropIfAbandoned(Epoch* e) REQUIRES(mu);
  void HandleFailure(const std::shared_ptr<Task>& t, const Status& err) REQUIRES(mu);
  // Attempt `s` ended without its answer (a failed request, whose frame may
  // still be streaming into `s`): from now on its cells are dropped and claim
  // nothing.
  void EndSink(AttemptSink& s) REQUIRES(mu);
  void EndSink(AttachedSink& s) REQUIRES(mu);
  // The completion of a failed read of `tasks`, while `writing()` says that
  // the decoder may still write into a slot through one of its sinks:
  // `resume` (the same completion, called again) is put off until it may
  // not, and true is returned. Nothing of the failure is acted on
  // meanwhile: no other attempt claims the slot, no batch holding it is
  // handed out or given back, and the attempt is not hedged (it still
  // counts as outstanding). False when nothing is being written or the
  // loader is closed: the completion goes on at once.
  bool ParkWhileWriting(std::vector<std::shared_ptr<Task>> tasks, std::function<bool()> writing,
                        std::function<void()> resume) REQUIRES(mu);
  // Moves to `out` the parked completions whose writes have ended, to be
  // called without the lock.
  void TakeResumable(std::vector<std::function<void()>>* out) REQUIRES(mu);
  // A request sent at `sent` failed with `err` (once per request, whatever
  // number of samples it carried): timeouts are counted, and a timeout or an
  // overload cuts the window (loader/congestion_gate.h).
  void OnRequestFailed(const Status& err, Clock::time_point sent) REQUIRES(mu);
  // --- attached datasets (loader_attached.cc) ---------------------------
  void LaunchAttached(const std::shared_ptr<Task>& t, int attempt, int plan_offset, Clock::time_point sent)
      EXCLUDES(mu);
  void LaunchForeignRead(const std::shared_ptr<Task>& t, int attempt, int plan_offset, Clock::time_point sent,
                         const Value& key) EXCLUDES(mu);
  std::span<uint8_t> AttachedDestination(AttachedSink& s, int32_t col, int32_t size) EXCLUDES(mu);
  Status ClaimAttached(AttachedSink& s, int64_t payload) REQUIRES(mu);
  Status CheckAttachedAnswer(AttachedSink& s) REQUIRES(mu);
  // `s` null: the attempt ended before its foreign read (the key lookup
  // failed). `count_request`: whether a failed `r` is counted as a failed
  // request (false for all but one sample of a grouped lookup).
  void OnAttachedDone(const std::shared_ptr<Task>& t, int attempt, const std::shared_ptr<AttachedSink>& s,
                      Clock::time_point sent, const Status& r, bool count_request = true) EXCLUDES(mu);
  // OnAttachedDone's accounting under the lock, without the Refill (a
  // grouped answer settles all of its samples, then refills once).
  // `grouped`: the attempt was a grouped foreign read (a failure counts in
  // group_failures).
  void SettleAttached(const std::shared_ptr<Task>& t, int attempt, const std::shared_ptr<AttachedSink>& s,
                      Clock::time_point sent, const Status& r, bool count_request, bool grouped = false) REQUIRES(mu);
  // Samples whose foreign keys are known, with their attempts and keys
  // (serialized, and as values).
  struct KnownKeys {
    std::vector<std::shared_ptr<Task>> tasks;
    std::vector<int> attempts;
    std::vector<std::pair<std::string, Value>> keys;
  };
  // The attempt of `t` goes on with the foreign key `key` (the snapshot's
  // answer, `cell` its bytes): kept for later, then the foreign read, or,
  // with `collect`, into it for the caller to launch.
  void ContinueWithKey(const std::shared_ptr<Task>& t, int attempt, int plan_offset, Clock::time_point sent,
                       StatusOr<Value> key, std::optional<cql::ByteView> cell, KnownKeys* collect = nullptr)
      EXCLUDES(mu);
  // --- attached datasets, grouped first attempts (loader_foreign_group.cc)
  // A group of first attempts (LaunchGroup): the samples whose foreign keys
  // are known read their rows together (LaunchForeignGroup) while
  // ForeignGroupsOn(), else each alone; the others look their keys up
  // together (LaunchKeyGroup).
  void LaunchAttachedGroup(std::vector<std::shared_ptr<Task>> tasks, std::vector<int> attempts,
                           Clock::time_point sent) EXCLUDES(mu);
  // The foreign reads of samples whose keys are known (one segment): one
  // coalesced read while ForeignGroupsOn() and there are several, else one
  // each.
  void LaunchKnownAttached(std::vector<std::shared_ptr<Task>> tasks, std::vector<int> attempts,
                           std::vector<std::pair<std::string, Value>> keys, Clock::time_point sent) EXCLUDES(mu);
  // Whether rows of samples with known keys may share a request now.
  bool ForeignGroupsOn() const REQUIRES(mu);
  // The serialized foreign key of `t` when known (its task's, or the key
  // cache's), and its value; nullopt when not known or not valid.
  std::optional<std::pair<std::string, Value>> KnownForeignKey(const Task& t) REQUIRES(mu);
  // IssueFirst for a sample whose foreign key is known: into a group of
  // foreign reads of its segment on the same replicas when groups are on,
  // else alone.
  void IssueKnownAttached(std::shared_ptr<Task> t, TaskGroups* g, std::vector<Launch>* out) REQUIRES(mu);
  // One coalesced foreign read of `tasks` (one split, distinct keys), each
  // row to its sample's AttachedSink (loader/foreign_group_sink.h).
  void LaunchForeignGroup(std::vector<std::shared_ptr<Task>> tasks, std::vector<int> attempts,
                          std::vector<std::pair<std::string, Value>> keys, Clock::time_point sent) EXCLUDES(mu);
  void OnForeignGroupDone(const std::vector<std::shared_ptr<Task>>& tasks, const std::vector<int>& attempts,
                          const std::shared_ptr<loader::ForeignGroupSink>& group,
                          const std::vector<std::shared_ptr<AttachedSink>>& sinks, Clock::time_point sent,
                          StatusOr<net::ResultSet> r) EXCLUDES(mu);
  // Grouped key lookups (several samples of one segment whose keys are not
  // known yet, one request): each found key goes on to its foreign read.
  void LaunchKeyGroup(std::vector<std::shared_ptr<Task>> tasks, std::vector<int> attempts, Clock::time_point sent)
      EXCLUDES(mu);
  void OnKeyGroupDone(const std::vector<std::shared_ptr<Task>>& tasks, const std::vector<int>& attempts,
                      Clock::time_point sent, StatusOr<net::ResultSet> r) EXCLUDES(mu);
  // Attached datasets, the first epoch: looks up the keys of the samples
  // that `e` will issue next, ahead of their issue, several to a request
  // (into the key cache only: each sample then reads its row in one
  // request). When fewer than half of the span (kLookAheadMin, or
  // kLookAheadWindows windows) are asked for ahead, asks for the rest at
  // once, so that groups fill; at most an eighth of the window (and at most
  // kLookAheadRequests) requests in flight. `out`: the requests to send.
  void LookAheadKeys(Epoch* e, std::vector<std::vector<SampleKey>>* out) REQUIRES(mu);
  void LaunchLookAhead(std::vector<SampleKey> keys) EXCLUDES(mu);
  // The grouped lookup of `keys` (one segment; KeyLookupManyCql), counted
  // in m_key_lookups, and the check of its answer: the key cell of each
  // sample found, by idx (store::GroupedSnapshotKeys).
  net::Statement KeyGroupStatement(const std::vector<SampleKey>& keys) EXCLUDES(mu);
  StatusOr<std::map<int32_t, std::optional<cql::ByteView>>> KeyGroupAnswer(const std::vector<SampleKey>& keys,
                                                                           const StatusOr<net::ResultSet>& r) const;
  // Whether first attempts may be grouped at all (coalesced data reads of a
  // native dataset, or grouped key lookups of an attached one).
  bool GroupsOn() const { return group_read_stmt != nullptr || (attached && attached->key_group_stmt != nullptr); }

  void PumpLoop() EXCLUDES(mu);
  void QueueDueRetries(Clock::time_point now, std::vector<Launch>* out) REQUIRES(mu);
  void QueueHedges(Clock::time_point now, std::vector<Launch>* out) REQUIRES(mu);
  void UpdateRates(Clock::time_point now) REQUIRES(mu);

  // --- the consumer side (loader.cc) -------------------------------------
  bool AllEpochsRead() const REQUIRES(mu);
  std::optional<std::pair<SampleKey, Status>> TakeSampleError() REQUIRES(mu);
  BatchPtr TakeBatch(Epoch& e) REQUIRES(mu);
  bool EpochEnded(const Epoch& e) const REQUIRES(mu);
  void EndEpoch(std::vector<Launch>* out) REQUIRES(mu);
  loader::Ranges DoneRanges(const Epoch& e) const REQUIRES(mu);
  // `err` of sample `key`, with the sample's path (reads it: no lock held).
  Status NamedError(SampleKey key, const Status& err) EXCLUDES(mu);
};

}  // namespace cqlstream

#endif  // CQLSTREAM_LOADER_LOADER_IMPL_H_
