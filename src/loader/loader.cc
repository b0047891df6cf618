// Copyright (c) cqlstream authors.
//
// The loader engine. One mutex (Impl::mu) guards all assembly state; it is
// taken by the I/O threads (cell destinations, completions), the consumer
// (Next) and the pump thread (retries, hedges, window control). Requests are
// launched outside the lock.
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
#include "cqlstream/loader.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <deque>
#include <map>
#include <queue>
#include <random>
#include <set>
#include <thread>

#include "loader/buffer_pool.h"
#include "loader/checkpoint.h"
#include "loader/plan.h"
#include "loader/window.h"
#include "net/policies.h"
#include "net/session.h"
#include "store/catalog.h"
#include "store/sample_row.h"
#include "util/mutex.h"

namespace cqlstream {

using Clock = std::chrono::steady_clock;
using loader::BatchBuffer;
using loader::BufferPool;
using loader::MemoryAccount;

namespace {

constexpr uint8_t kPending = 0, kFilled = 1, kHole = 2;

struct BatchImpl final : Batch {
  std::unique_ptr<BatchBuffer> buf;
  std::shared_ptr<BufferPool> pool;
  uint64_t used = 0;  // bytes reserved in buf
  // Samples that did not fit in buf at their turn (their own buffers, joined
  // into one contiguous buffer when the batch is finalized), and their bytes.
  std::vector<std::unique_ptr<BatchBuffer>> side;
  uint64_t side_bytes = 0;
  // Assembly state (loader lock).
  int capacity = 0, reserved = 0, completed = 0, holes = 0;
  bool sealed = false;
  bool tail = false;  // opened for fewer samples than a batch: the epoch's last
  int64_t build_index = 0;
  std::vector<uint64_t> seqs;
  std::vector<uint8_t> state;

  std::span<const uint8_t> data() const override { return {buf ? buf->data() : nullptr, used}; }

  ~BatchImpl() override {
    if (pool) pool->account()->in_batches -= static_cast<int64_t>(side_bytes);
    if (buf && pool) {
      pool->account()->in_batches -= static_cast<int64_t>(used);
      pool->Release(std::move(buf), used);
    }
  }
  // Where sample `k`'s bytes are (its side buffer, or its offset in buf).
  uint8_t* SampleData(size_t k) const {
    return k < side.size() && side[k] ? side[k]->data() : buf->data() + offsets[k];
  }

  void Resize(int n) {
    capacity = n;
    const size_t k = static_cast<size_t>(n);
    offsets.assign(k, 0);
    sizes.assign(k, 0);
    image_sizes.assign(k, 0);
    labels.assign(k, -1);
    keys.assign(k, 0);
    seqs.assign(k, 0);
    state.assign(k, kPending);
  }
};

struct Epoch;

struct Task {
  Epoch* ep = nullptr;
  uint64_t seq = 0;
  SampleKey key = 0;
  std::shared_ptr<BatchImpl> batch;
  int slot = -1;
  uint64_t offset = 0;
  uint8_t* base = nullptr;  // where the sample's bytes go (the slot's region)
  int64_t size = -1;
  int owner = -1;           // attempt that owns the slot
  store::ChunkPlacer placer;  // the owner's chunks so far
  store::SampleStatics statics;  // the owner's static columns
  int attempts = 0, failures = 0, outstanding = 0;
  bool resolved = false;
  bool hedged = false;
  int hedge_attempt = -1;
  Clock::time_point first_failure{};
  Clock::time_point issued{};
};

struct Epoch {
  int64_t number = 0;
  bool ordered = false;   // fixed batch composition (ordered mode, Fetch)
  std::vector<SampleKey> keys;  // Fetch: the keys asked for (seq -> key)
  std::deque<std::pair<SampleKey, Status>> errors;  // unreadable samples, raised in order
  loader::Permutation perm{0, 0, 0, false};
  loader::RankPlan plan;
  uint64_t to_issue = 0;
  uint64_t next_seq = 0;
  uint64_t resolved = 0;
  uint64_t unslotted = 0;  // tasks (issued or not) without a slot and not resolved
  int64_t base_batches = 0;
  int64_t batches_made = 0;
  int64_t batches_delivered = 0;
  std::shared_ptr<BatchImpl> open;  // out-of-order: the batch taking new samples
  std::map<int64_t, std::shared_ptr<BatchImpl>> building;
  std::deque<std::shared_ptr<BatchImpl>> ready;          // out-of-order: completion order
  std::map<int64_t, std::shared_ptr<BatchImpl>> ready_by_index;  // ordered
  int64_t next_ordered = 0;
  // Delivered (handed out) or skipped sequence numbers, for checkpoints.
  uint64_t done_wm = 0;
  std::set<uint64_t> done_above;

  bool Finished() const {
    return resolved == to_issue && building.empty() && ready.empty() && ready_by_index.empty();
  }
  void MarkDone(uint64_t seq) {
    if (seq == done_wm) {
      ++done_wm;
      while (!done_above.empty() && *done_above.begin() == done_wm) {
        done_above.erase(done_above.begin());
        ++done_wm;
      }
    } else if (seq > done_wm) {
      done_above.insert(seq);
    }
  }
};

// One request to send: a new attempt (first, retry, hedge) or the next page
// of an attempt in progress.
struct Launch {
  std::shared_ptr<Task> task;
  int plan_offset = 0;  // which replica/connection of the query plan first
  bool hedge = false;
  std::optional<cql::Bytes> paging_state;  // continuation of the same attempt
  int attempt = -1;                        // continuation: that attempt; else a new one

  static Launch First(std::shared_ptr<Task> t) { return {std::move(t), 0, false, std::nullopt, -1}; }
  static Launch Retry(std::shared_ptr<Task> t, int plan_offset) {
    return {std::move(t), plan_offset, false, std::nullopt, -1};
  }
  static Launch Hedge(std::shared_ptr<Task> t, int plan_offset) {
    return {std::move(t), plan_offset, true, std::nullopt, -1};
  }
  static Launch NextPage(std::shared_ptr<Task> t, int plan_offset, cql::Bytes paging_state, int attempt) {
    return {std::move(t), plan_offset, false, std::move(paging_state), attempt};
  }
};

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  return (end != v && *end == '\0') ? static_cast<int>(x) : fallback;
}

}  // namespace

class AttemptSink;

// ============================================================================

struct Loader::Impl {
  LoaderOptions o;
  int rank = 0, world = 1;
  std::shared_ptr<net::Session> session;
  DatasetInfo ds;
  net::PreparedPtr read_stmt;
  net::PreparedPtr path_stmt;
  std::string split;
  loader::SampleSource source;
  std::map<int32_t, int64_t> seg_max_size;  // the catalog's hints, per segment
  net::NoRetryPolicy no_retry;
  std::shared_ptr<MemoryAccount> account = std::make_shared<MemoryAccount>();
  std::shared_ptr<BufferPool> pool;
  int64_t budget = 0;

  // Guards the fields below and the assembly state reached through them
  // (Epoch, Task, BatchImpl before hand-out; the analysis cannot name mu
  // from those structs, so their contract is this comment).
  mutable Mutex mu;
  CondVar ready_cv;  // consumer waits
  CondVar pump_cv;   // pump thread waits
  bool started GUARDED_BY(mu) = false;
  bool closed GUARDED_BY(mu) = false;
  std::deque<std::unique_ptr<Epoch>> epochs GUARDED_BY(mu);  // consumer's epoch first
  int64_t next_epoch GUARDED_BY(mu) = 0;                     // number of the next epoch to create
  int64_t consumer_epoch GUARDED_BY(mu) = 0;
  bool all_done GUARDED_BY(mu) = false;
  int64_t in_flight GUARDED_BY(mu) = 0;           // tasks issued and not resolved
  int64_t in_flight_unslotted GUARDED_BY(mu) = 0; // of which without a slot yet
  std::vector<std::unique_ptr<Epoch>> fetches GUARDED_BY(mu);  // Fetch() calls in progress
  struct Retry {
    Clock::time_point due;
    std::shared_ptr<Task> task;
    int plan_offset;
    bool operator>(const Retry& r) const { return due > r.due; }
  };
  std::priority_queue<Retry, std::vector<Retry>, std::greater<>> retries GUARDED_BY(mu);
  struct Watch {
    Clock::time_point issued;
    std::weak_ptr<Task> task;
    int attempt;
  };
  std::deque<Watch> watch GUARDED_BY(mu);  // attempts in issue order, for hedging
  loader::WindowController ctl GUARDED_BY(mu);
  net::LatencyTracker latencies;
  double avg_size GUARDED_BY(mu) = 0;  // EWMA of sample sizes
  double hedge_tokens GUARDED_BY(mu) = 10;  // hedge budget: +0.05 per completed sample, at most 100

  // Metrics.
  int64_t m_images GUARDED_BY(mu) = 0, m_bytes GUARDED_BY(mu) = 0, m_batches GUARDED_BY(mu) = 0,
          m_retries GUARDED_BY(mu) = 0, m_hedges GUARDED_BY(mu) = 0, m_hedge_wins GUARDED_BY(mu) = 0,
          m_timeouts GUARDED_BY(mu) = 0, m_dupes GUARDED_BY(mu) = 0, m_skipped GUARDED_BY(mu) = 0,
          m_dropped GUARDED_BY(mu) = 0;
  double m_stall_s GUARDED_BY(mu) = 0;
  double rate_images GUARDED_BY(mu) = 0, rate_bytes GUARDED_BY(mu) = 0;
  int64_t rate_last_images GUARDED_BY(mu) = 0, rate_last_bytes GUARDED_BY(mu) = 0;
  Clock::time_point rate_at GUARDED_BY(mu) = Clock::now();

  std::thread pump;

  explicit Impl(LoaderOptions opts)
      : o(std::move(opts)), ctl(loader::WindowController::Options{}, Clock::now()) {}

  // --- setup ----------------------------------------------------------------
  Status Init();
  std::unique_ptr<Epoch> MakeEpoch(int64_t number, std::vector<loader::PositionRange> ranges,
                                   int64_t base_batches) REQUIRES(mu);
  store::SampleHints HintsFor(SampleKey k) const {
    store::SampleHints h;
    auto it = seg_max_size.find(KeySegment(k));
    h.max_size = it != seg_max_size.end() ? it->second : -1;
    h.chunk_size = ds.chunk_size;
    h.label_kind = ds.label_kind;
    h.classes = ds.class_names.empty() ? -1 : static_cast<int64_t>(ds.class_names.size());
    return h;
  }
  int64_t BatchesFor(uint64_t n) const {
    const uint64_t b = static_cast<uint64_t>(o.batch_size);
    return static_cast<int64_t>(o.drop_last ? n / b : (n + b - 1) / b);
  }

  // --- assembly ------------------------------------------------------------
  Status ReserveSlot(Task& t, int64_t size) REQUIRES(mu);
  std::shared_ptr<BatchImpl> NewBatch(Epoch& e, int capacity, int64_t build_index, Status* err) REQUIRES(mu);
  void CheckBatch(Epoch& e, const std::shared_ptr<BatchImpl>& b) REQUIRES(mu);
  Status Finalize(BatchImpl& b, bool ordered) REQUIRES(mu);
  void CompleteTask(Task& t) REQUIRES(mu);
  void FailTask(Task& t, const Status& err) REQUIRES(mu);
  void HandleFailure(const std::shared_ptr<Task>& t, const Status& err) REQUIRES(mu);
  void Refill(std::vector<Launch>* out) REQUIRES(mu);
  Epoch* IssuingEpoch() REQUIRES(mu);
  Status Claim(AttemptSink& s) REQUIRES(mu);

  // --- requests -------------------------------------------------------------
  void Start(std::vector<Launch> launches) EXCLUDES(mu);
  void LaunchOne(Launch l) EXCLUDES(mu);
  void OnAttemptDone(const std::shared_ptr<Task>& t, const std::shared_ptr<AttemptSink>& sink,
                     Clock::time_point sent, StatusOr<net::ResultSet> r) EXCLUDES(mu);
  std::span<uint8_t> Destination(AttemptSink& s, int32_t size) EXCLUDES(mu);
  std::chrono::milliseconds AttemptTimeout() const;
  void PumpLoop() EXCLUDES(mu);
  std::string DescribeKey(SampleKey k) EXCLUDES(mu);
};

// One execution of a sample read (or one page of it). Hands the key and
// static cells to store::SampleRowCells and places data cells through
// Impl::Destination.
class AttemptSink final : public cql::CellSink {
 public:
  AttemptSink(Loader::Impl* l, std::shared_ptr<Task> t, int attempt, bool continuation)
      : l_(l), t_(std::move(t)), attempt(attempt), continuation(continuation), cells(t_->key, continuation) {}

  Status OnRowsBegin(const cql::RowsMetadata&, int32_t rows) override {
    this->rows = rows;
    return Status::OK();
  }
  std::span<uint8_t> CellDestination(int32_t, int32_t col, int32_t size) override {
    if (col != store::kColData) return {};
    return l_->Destination(*this, size);
  }
  Status OnCell(int32_t row, int32_t col, std::optional<cql::ByteView> data) override {
    if (col == store::kColData) {
      data_cells++;
      return Status::OK();
    }
    cells.OnCell(row, col, data);
    return Status::OK();
  }

  Loader::Impl* l_;
  std::shared_ptr<Task> t_;
  const int attempt;
  const bool continuation;
  store::SampleRowCells cells;
  int32_t rows = 0;
  int data_cells = 0;
  bool offered = false;  // some data cell asked for a destination (loader lock)
  Status err;  // set under the loader lock
};

// ----------------------------------------------------------------------------
// Setup
// ----------------------------------------------------------------------------

Status Loader::Impl::Init() {
  if (o.batch_size < 1) return Status::InvalidArgument(fmt::format("batch_size must be >= 1, got {}", o.batch_size));
  rank = o.rank >= 0 ? o.rank : EnvInt("RANK", 0);
  world = o.world_size > 0 ? o.world_size : EnvInt("WORLD_SIZE", 1);
  if (world < 1 || rank < 0 || rank >= world) {
    return Status::InvalidArgument(fmt::format("rank {} is not in [0, world_size {})", rank, world));
  }
  if (o.dataset.empty()) return Status::InvalidArgument("no dataset given");

  ConnectionOptions co = o.connection;
  const int max_conns =
      o.max_connections_per_host > 0 ? o.max_connections_per_host : loader::WindowController::kDefaultMaxConnections;
  co.connections_per_host = std::min(std::max(1, co.connections_per_host), max_conns);
  // Setup queries (catalog, prepare) use the session's retrying default
  // policy; sample reads set their own (none: the loader retries per sample).
  net::SessionOptions so;
  net::DefaultRetryPolicy::Options ro;
  ro.max_retries = 8;
  so.retry = std::make_shared<net::DefaultRetryPolicy>(ro);
  auto s = net::Session::Connect(co, so);
  if (!s.ok()) return s.status();
  session = *s;
  CQLS_ASSIGN_OR_RETURN(ds, store::LoadDataset(*session, co.keyspace, o.dataset));

  split = o.split;
  if (!o.selection_path.empty()) {
    CQLS_ASSIGN_OR_RETURN(Selection sel, Selection::Load(o.selection_path));
    if (sel.dataset != ds.name) {
      return Status::InvalidArgument(fmt::format("selection '{}' was made for dataset '{}', not '{}'",
                                                 o.selection_path, sel.dataset, ds.name));
    }
    split = sel.split;
    // Every selected key must be committed.
    std::map<int32_t, int64_t> counts;
    for (const auto& g : ds.segments) counts[g.seg] = g.count;
    for (SampleKey k : sel.keys) {
      auto it = counts.find(KeySegment(k));
      if (it == counts.end() || KeyIndex(k) >= it->second) {
        return Status::InvalidArgument(fmt::format("selection '{}' holds key {} which dataset '{}' does not have",
                                                   o.selection_path, FormatKey(k), ds.name));
      }
    }
    source = loader::SampleSource::FromKeys(std::move(sel.keys));
  } else {
    source = loader::SampleSource::FromSegments(ds.SplitSegments(split));
  }
  if (source.size() == 0) {
    std::string splits;
    for (const auto& sp : ds.splits()) splits += (splits.empty() ? "" : ", ") + sp;
    return Status::NotFound(fmt::format("{} of dataset '{}' has no samples (splits: {})",
                                        o.selection_path.empty() ? "split '" + split + "'" : "the selection",
                                        ds.name, splits.empty() ? "none" : splits));
  }
  CQLS_ASSIGN_OR_RETURN(read_stmt, session->Prepare(store::DataReadQuery(ds)));
  {
    auto p = session->Prepare(store::SamplePathQuery(ds));
    if (p.ok()) path_stmt = *p;  // only for error messages
  }

  // Batch memory: the address space a batch may need, and the byte budget.
  const int64_t max_size = std::max<int64_t>(ds.MaxSize(split), 1);
  const int64_t split_bytes = std::max<int64_t>(ds.Bytes(split), 1);
  const double mean = static_cast<double>(split_bytes) / static_cast<double>(std::max<int64_t>(ds.Count(split), 1));
  MutexLock lock(&mu);  // (the pump thread starts below)
  avg_size = mean;
  uint64_t reservation = loader::BatchReservation(o.batch_size, max_size);
  if (o.max_batch_reservation > 0) reservation = std::min(reservation, static_cast<uint64_t>(o.max_batch_reservation));
  const size_t capacity = static_cast<size_t>(reservation);
  for (const auto& g : ds.segments) seg_max_size[g.seg] = g.max_size;
  budget = o.memory_bytes > 0 ? o.memory_bytes
                              : std::max<int64_t>(int64_t{1} << 30, static_cast<int64_t>(8 * o.batch_size * mean));
  if (static_cast<double>(budget) < 2.0 * o.batch_size * mean) {
    return Status::InvalidArgument(fmt::format(
        "memory budget of {} bytes is less than two batches of {} samples (~{:.0f} bytes each)", budget,
        o.batch_size, o.batch_size * mean));
  }
  // Pooled buffers count against the budget: keep at most what it can hold.
  const int max_pooled =
      static_cast<int>(std::clamp<double>(static_cast<double>(budget) / (4.0 * o.batch_size * mean), 1.0, 8.0));
  pool = std::make_shared<BufferPool>(capacity, max_pooled, account);

  loader::WindowController::Options wo;
  wo.initial_window = o.initial_window > 0 ? o.initial_window : 32;
  wo.max_window = o.max_in_flight > 0 ? o.max_in_flight : 16384;
  wo.min_window = std::min(4, wo.max_window);
  wo.initial_connections = co.connections_per_host;
  wo.max_connections = max_conns;
  wo.adaptive = o.adaptive;
  ctl = loader::WindowController(wo, Clock::now());

  next_epoch = 0;
  pump = std::thread([this] { PumpLoop(); });
  return Status::OK();
}

std::unique_ptr<Epoch> Loader::Impl::MakeEpoch(int64_t number, std::vector<loader::PositionRange> ranges,
                                               int64_t base_batches) {
  auto e = std::make_unique<Epoch>();
  e->number = number;
  e->ordered = o.ordered;
  e->perm = loader::Permutation(source.size(), o.seed, static_cast<uint64_t>(number), o.shuffle);
  e->plan = loader::RankPlan(std::move(ranges));
  const uint64_t n = e->plan.size();
  const uint64_t b = static_cast<uint64_t>(o.batch_size);
  if (o.drop_last) {
    // Every rank delivers the same number of full batches: floor(N / world / B).
    const uint64_t per_rank = base_batches == 0 && e->plan.ranges().size() == 1 ? source.size() / world : n;
    e->to_issue = std::min<uint64_t>(n, per_rank / b * b);
    m_dropped += static_cast<int64_t>(n - e->to_issue);
  } else {
    e->to_issue = n;
  }
  e->unslotted = e->to_issue;
  e->base_batches = base_batches;
  return e;
}

// ----------------------------------------------------------------------------
// Assembly
// ----------------------------------------------------------------------------

std::shared_ptr<BatchImpl> Loader::Impl::NewBatch(Epoch& e, int capacity, int64_t build_index, Status* err) {
  auto buf = pool->Acquire();
  if (!buf.ok()) {
    *err = buf.status();
    return nullptr;
  }
  auto b = std::make_shared<BatchImpl>();
  b->buf = std::move(*buf);
  b->pool = pool;
  b->Resize(capacity);
  b->build_index = build_index;
  b->epoch = e.number;
  e.building[build_index] = b;
  return b;
}

Status Loader::Impl::ReserveSlot(Task& t, int64_t size) {
  Epoch& e = *t.ep;
  const uint64_t B = static_cast<uint64_t>(o.batch_size);
  std::shared_ptr<BatchImpl> b;
  Status err;
  // The size was checked against the catalog (store::CheckStatics); the
  // catalog is a hint too, so the memory budget bounds what is reserved.
  if (size < 0) return Status::Corruption(fmt::format("sample {} has a negative size", FormatKey(t.key)));
  if (size > budget) {
    return Status::InvalidArgument(fmt::format("sample {} is {} bytes, more than the loader's memory budget of {}",
                                               FormatKey(t.key), size, budget));
  }
  if (e.ordered) {
    const int64_t idx = static_cast<int64_t>(t.seq / B);
    auto it = e.building.find(idx);
    if (it != e.building.end()) {
      b = it->second;
    } else {
      const uint64_t first = static_cast<uint64_t>(idx) * B;
      b = NewBatch(e, static_cast<int>(std::min<uint64_t>(B, e.to_issue - first)), idx, &err);
      if (!b) return err;
    }
    t.slot = static_cast<int>(t.seq % B);
  } else {
    if (!e.open) {
      const int cap = static_cast<int>(std::min<uint64_t>(B, e.unslotted));
      e.open = NewBatch(e, cap, e.batches_made++, &err);
      if (!e.open) return err;
      e.open->tail = static_cast<uint64_t>(cap) < B;
    }
    b = e.open;
    t.slot = b->reserved;
  }
  const size_t k = static_cast<size_t>(t.slot);
  const uint64_t n = static_cast<uint64_t>(size);
  if (n <= b->buf->capacity() - b->used) {
    t.offset = b->used;
    t.base = b->buf->data() + t.offset;
    b->used += n;
  } else {
    // Does not fit in the batch's buffer: a buffer of its own.
    auto side = BatchBuffer::Reserve(static_cast<size_t>(n));
    if (!side.ok()) return side.status();
    if (b->side.size() <= k) b->side.resize(static_cast<size_t>(b->capacity));
    t.offset = 0;
    t.base = (*side)->data();
    b->side[k] = std::move(*side);
    b->side_bytes += n;
  }
  b->reserved++;
  b->seqs[k] = t.seq;
  b->keys[k] = t.key;
  b->offsets[k] = t.offset;
  account->in_batches += size;
  t.batch = b;
  t.size = size;
  e.unslotted--;
  in_flight_unslotted--;
  if (!e.ordered && b->reserved == b->capacity) {
    b->sealed = true;
    e.open = nullptr;
  }
  return Status::OK();
}

void Loader::Impl::CheckBatch(Epoch& e, const std::shared_ptr<BatchImpl>& b) {
  const bool full = e.ordered || b->sealed;
  if (!full || b->completed + b->holes < b->capacity) return;
  e.building.erase(b->build_index);
  Status joined = b->completed == 0 ? Status::OK() : Finalize(*b, e.ordered);
  if (!joined.ok()) {
    // No memory to join the batch's buffers: its samples are unreadable.
    for (int i = 0; i < b->capacity; ++i) {
      if (b->state[static_cast<size_t>(i)] != kFilled) continue;
      m_skipped++;
      if (o.on_missing == OnMissing::kRaise) e.errors.emplace_back(b->keys[static_cast<size_t>(i)], joined);
    }
    b->completed = 0;
  }
  if (b->completed == 0) {
    // Every sample was skipped: no batch. Ordered mode leaves a marker so
    // that delivery moves past this index.
    if (e.ordered) e.ready_by_index[b->build_index] = nullptr;
    ready_cv.SignalAll();
    return;
  }
  if (e.ordered) {
    e.ready_by_index[b->build_index] = b;
  } else {
    e.ready.push_back(b);
  }
  ready_cv.SignalAll();
}

Status Loader::Impl::Finalize(BatchImpl& b, bool ordered) {
  // The order samples are presented in: plan order (ordered mode) or the
  // order their bytes were placed (out-of-order; samples in side buffers
  // last). Holes are dropped and the bytes compacted; in ordered mode the
  // bytes are laid out in plan order so that a batch is bit-for-bit
  // reproducible.
  std::vector<int> order;
  for (int i = 0; i < b.capacity; ++i) {
    if (b.state[static_cast<size_t>(i)] == kFilled) order.push_back(i);
  }
  auto in_side = [&](int i) { return static_cast<size_t>(i) < b.side.size() && b.side[static_cast<size_t>(i)]; };
  if (!ordered) {
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
      if (in_side(x) != in_side(y)) return in_side(y);
      return b.offsets[static_cast<size_t>(x)] < b.offsets[static_cast<size_t>(y)];
    });
  }
  bool dense = b.side_bytes == 0;
  uint64_t cursor = 0;
  for (int i : order) {
    dense = dense && b.offsets[static_cast<size_t>(i)] == cursor;
    cursor += b.sizes[static_cast<size_t>(i)];
  }
  auto pick = [&](auto& v) {
    std::remove_reference_t<decltype(v)> out;
    out.reserve(order.size());
    for (int i : order) out.push_back(v[static_cast<size_t>(i)]);
    v.swap(out);
  };
  if (!dense && (ordered || b.side_bytes > 0)) {
    // Copy into a fresh buffer in presentation order (ordered mode's one
    // extra copy; a batch with side buffers is joined into one buffer).
    auto nb = cursor <= pool->capacity() ? pool->Acquire() : BatchBuffer::Reserve(static_cast<size_t>(cursor));
    if (!nb.ok() && b.side_bytes > 0) return nb.status();
    if (nb.ok()) {
      uint64_t at = 0;
      for (int i : order) {
        const size_t k = static_cast<size_t>(i);
        if (b.sizes[k] > 0) std::memcpy((*nb)->data() + at, b.SampleData(k), b.sizes[k]);
        b.offsets[k] = at;
        at += b.sizes[k];
      }
      pool->Release(std::move(b.buf), b.used);
      b.buf = std::move(*nb);
      account->in_batches -= static_cast<int64_t>(b.used + b.side_bytes - at);
      b.used = at;
      b.side.clear();
      b.side_bytes = 0;
    }
  } else if (!dense) {
    // Out-of-order: only holes to close; moving down in offset order is safe.
    uint64_t at = 0;
    for (int i : order) {
      const size_t k = static_cast<size_t>(i);
      if (b.offsets[k] != at) std::memmove(b.buf->data() + at, b.buf->data() + b.offsets[k], b.sizes[k]);
      b.offsets[k] = at;
      at += b.sizes[k];
    }
    account->in_batches -= static_cast<int64_t>(b.used - at);
    b.used = at;
  }
  pick(b.offsets);
  pick(b.sizes);
  pick(b.image_sizes);
  pick(b.labels);
  pick(b.keys);
  pick(b.seqs);
  if (!b.multilabels.empty()) pick(b.multilabels);
  b.state.assign(order.size(), kFilled);
  b.capacity = static_cast<int>(order.size());
  return Status::OK();
}

void Loader::Impl::CompleteTask(Task& t) {
  Epoch& e = *t.ep;
  BatchImpl& b = *t.batch;
  const size_t k = static_cast<size_t>(t.slot);
  const store::SampleStatics& s = t.statics;
  b.sizes[k] = static_cast<uint64_t>(t.size);
  b.image_sizes[k] = s.image_size >= 0 ? static_cast<uint64_t>(s.image_size) : static_cast<uint64_t>(t.size);
  b.labels[k] = s.label;
  if (ds.label_kind == LabelKind::kMultiLabel) {
    if (b.multilabels.size() != b.keys.size()) b.multilabels.resize(b.keys.size());
    b.multilabels[k] = s.labels;
  }
  b.state[k] = kFilled;
  b.completed++;
  t.resolved = true;
  e.resolved++;
  in_flight--;
  avg_size = 0.99 * avg_size + 0.01 * static_cast<double>(t.size);
  CheckBatch(e, t.batch);
  t.batch.reset();
}

void Loader::Impl::FailTask(Task& t, const Status& err) {
  Epoch& e = *t.ep;
  t.resolved = true;
  e.resolved++;
  in_flight--;
  m_skipped++;
  const uint64_t B = static_cast<uint64_t>(o.batch_size);
  std::shared_ptr<BatchImpl> b = t.batch;
  if (b) {
    b->state[static_cast<size_t>(t.slot)] = kHole;
    b->holes++;
  } else {
    e.unslotted--;
    in_flight_unslotted--;
    if (e.ordered) {
      const int64_t idx = static_cast<int64_t>(t.seq / B);
      auto it = e.building.find(idx);
      if (it != e.building.end()) {
        b = it->second;
      } else {
        Status ignored;
        const uint64_t first = static_cast<uint64_t>(idx) * B;
        b = NewBatch(e, static_cast<int>(std::min<uint64_t>(B, e.to_issue - first)), idx, &ignored);
      }
      if (b) {
        const size_t k = static_cast<size_t>(t.seq % B);
        b->state[k] = kHole;
        b->seqs[k] = t.seq;
        b->holes++;
        b->reserved++;
      }
    } else if (e.open && e.open->capacity > e.open->reserved + static_cast<int>(e.unslotted)) {
      // Fewer samples are left than the open batch expects.
      e.open->capacity = e.open->reserved + static_cast<int>(e.unslotted);
      e.open->tail = true;
      e.open->sealed = e.open->reserved == e.open->capacity;
      b = e.open;
      if (e.open->sealed) e.open = nullptr;
    }
  }
  e.MarkDone(t.seq);  // resolved: a checkpoint must not read it again
  if (o.on_missing == OnMissing::kRaise) e.errors.emplace_back(t.key, err);
  if (b) CheckBatch(e, b);
  t.batch.reset();
  ready_cv.SignalAll();
}

void Loader::Impl::HandleFailure(const std::shared_ptr<Task>& t, const Status& err) {
  const auto now = Clock::now();
  if (t->failures++ == 0) t->first_failure = now;
  const bool congestion = err.IsTimeout() || err.code() == Status::Code::kOverloaded;
  if (err.IsTimeout()) m_timeouts++;
  if (congestion) ctl.OnCongestion(now);
  const bool missing = err.IsNotFound();
  const bool corrupt = err.code() == Status::Code::kCorruption;
  const bool transient = net::IsTransient(err) || missing || corrupt;
  const int max_attempts = o.max_attempts > 0 ? o.max_attempts : 64;
  const int limit = (missing || corrupt) ? std::min(3, max_attempts) : max_attempts;
  const auto budget_ms = o.retry_budget.count() > 0 ? o.retry_budget : std::chrono::milliseconds(120000);
  if (transient && t->failures < limit && now - t->first_failure < budget_ms) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    const double base = 5.0 * std::pow(2.0, std::min(t->failures - 1, 12));
    const double d = std::min(2000.0, base) * std::uniform_real_distribution<double>(0.5, 1.0)(rng);
    retries.push(Retry{now + std::chrono::microseconds(static_cast<int64_t>(d * 1000)), t, t->failures});
    m_retries++;
    pump_cv.Signal();
    return;
  }
  Status final = Status(err.code(),
                        fmt::format("sample {} could not be read after {} attempt{}: {}", FormatKey(t->key),
                                    t->attempts, t->attempts == 1 ? "" : "s", err.message()),
                        err.server_error_ptr());
  FailTask(*t, final);
}

Epoch* Loader::Impl::IssuingEpoch() {
  for (auto& e : epochs) {
    if (e->next_seq < e->to_issue) return e.get();
  }
  // Create the next epoch: the consumer's, or one ahead of it.
  if (epochs.size() >= 2) return nullptr;
  if (o.epochs > 0 && next_epoch >= o.epochs) return nullptr;
  epochs.push_back(MakeEpoch(next_epoch, {loader::RankSlice(source.size(), rank, world)}, 0));
  next_epoch++;
  Epoch* e = epochs.back().get();
  if (e->to_issue == 0) return nullptr;
  return e;
}

void Loader::Impl::Refill(std::vector<Launch>* out) {
  if (!started || closed) return;
  while (in_flight < ctl.window()) {
    // The byte budget: bytes already placed in batches and pooled buffers,
    // plus what the requests without a slot will bring.
    double est = static_cast<double>(account->total()) +
                 static_cast<double>(in_flight_unslotted + 1) * std::max(avg_size, 1.0);
    if (est > static_cast<double>(budget) && account->pooled_resident.load() > 0) {
      // Recycled buffers are the first thing to give up.
      est -= static_cast<double>(pool->Shrink(static_cast<int64_t>(est) - budget));
    }
    // Over budget: wait for batches to be released, except when nothing is
    // in flight and no batch is ready for the consumer: then one request is
    // allowed, so that progress never depends on the budget.
    const bool starving = in_flight == 0 && (epochs.empty() || (epochs.front()->ready.empty() &&
                                                                epochs.front()->ready_by_index.empty()));
    if (est > static_cast<double>(budget) && !starving) {
      ctl.OnHeldBack();
      return;
    }
    Epoch* e = IssuingEpoch();
    if (e == nullptr) {
      ctl.OnHeldBack();
      return;
    }
    auto t = std::make_shared<Task>();
    t->ep = e;
    t->seq = e->next_seq++;
    t->key = source.KeyAt(e->perm(e->plan.PositionAt(t->seq)));
    in_flight++;
    in_flight_unslotted++;
    out->push_back(Launch::First(std::move(t)));
  }
}

// ----------------------------------------------------------------------------
// Requests
// ----------------------------------------------------------------------------

std::chrono::milliseconds Loader::Impl::AttemptTimeout() const {
  if (o.request_timeout.count() > 0) return o.request_timeout;
  auto p99 = latencies.Percentile(99.0, 200);
  if (!p99) return std::chrono::milliseconds(10000);
  const auto t = std::chrono::duration_cast<std::chrono::milliseconds>(*p99 * 8);
  return std::clamp(t, std::chrono::milliseconds(2000), std::chrono::milliseconds(30000));
}

void Loader::Impl::Start(std::vector<Launch> launches) {
  for (auto& l : launches) LaunchOne(std::move(l));
}

void Loader::Impl::LaunchOne(Launch l) {
  const auto now = Clock::now();
  int attempt = l.attempt;
  {
    MutexLock lock(&mu);
    if (closed || l.task->resolved) return;
    if (attempt < 0) {
      attempt = l.task->attempts++;
      if (l.hedge) {
        m_hedges++;
        l.task->hedge_attempt = attempt;
      }
      watch.push_back(Watch{now, l.task, attempt});
    }
    l.task->outstanding++;
    l.task->issued = now;
  }
  const SampleKey key = l.task->key;
  net::Statement st = net::Statement::Bound(read_stmt, {Value::Int(KeySegment(key)), Value::Int(KeyIndex(key))});
  st.idempotent = true;
  st.consistency = cql::Consistency::kLocalOne;
  st.page_size = 64;  // chunks per page: up to 64 MiB per response
  st.paging_state = std::move(l.paging_state);
  st.timeout = AttemptTimeout();
  st.plan_offset = l.plan_offset;
  st.retry = &no_retry;
  auto sink = std::make_shared<AttemptSink>(this, l.task, attempt, st.paging_state.has_value());
  st.sink = [sink](int) { return sink; };
  auto task = l.task;
  session->ExecuteAsync(std::move(st), [this, task, sink, now](StatusOr<net::ResultSet> r) {
    OnAttemptDone(task, sink, now, std::move(r));
  });
}

Status Loader::Impl::Claim(AttemptSink& s) {
  Task& t = *s.t_;
  if (!s.cells.status().ok()) return s.cells.status();
  const store::SampleStatics& st = s.cells.statics();
  CQLS_RETURN_IF_ERROR(store::CheckStatics(t.key, st, HintsFor(t.key)));
  if (!t.batch) {
    CQLS_RETURN_IF_ERROR(ReserveSlot(t, st.size));
  } else if (t.size != st.size) {
    return Status::Corruption(fmt::format("sample {} changed size between attempts ({} then {} bytes)",
                                          FormatKey(t.key), t.size, st.size));
  }
  t.owner = s.attempt;
  t.statics = st;
  t.placer.Begin(t.size, ds.chunk_size);
  return Status::OK();
}

std::span<uint8_t> Loader::Impl::Destination(AttemptSink& s, int32_t size) {
  MutexLock lock(&mu);
  Task& t = *s.t_;
  s.offered = true;
  if (t.resolved || closed || !s.err.ok()) return {};
  if (s.cells.key_mismatch()) {
    s.err = Status::ConnectionLost(fmt::format("sample {}: the answer carries another sample's key", FormatKey(t.key)));
    return {};
  }
  if (t.owner == -1) {
    if (s.continuation) return {};  // the first page's owner failed: this page is useless
    s.err = Claim(s);
    if (!s.err.ok()) return {};
  }
  if (t.owner != s.attempt) return {};  // a duplicate (hedge) answer: dropped
  auto at = t.placer.Place(t.key, size);
  if (!at.ok()) {
    s.err = at.status();
    return {};
  }
  return {t.base + *at, static_cast<size_t>(size)};
}

void Loader::Impl::OnAttemptDone(const std::shared_ptr<Task>& t, const std::shared_ptr<AttemptSink>& s,
                                 Clock::time_point sent, StatusOr<net::ResultSet> r) {
  std::vector<Launch> launches;
  {
    MutexLock lock(&mu);
    t->outstanding--;
    if (closed) return;
    const auto latency = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - sent);
    if (t->resolved) {
      if (r.ok()) m_dupes++;
      return;
    }
    Status err;
    bool page_more = false;
    if (!r.ok()) {
      err = r.status();
    } else if (!s->err.ok()) {
      err = s->err;
    } else if (s->cells.key_mismatch()) {
      err = Status::ConnectionLost(fmt::format("sample {}: the answer carries another sample's key", FormatKey(t->key)));
    } else if (!s->continuation && s->rows == 0) {
      err = Status::NotFound(fmt::format("sample {} has no data row", FormatKey(t->key)));
    } else if (!s->cells.status().ok()) {
      err = s->cells.status();
    } else {
      if (t->owner == -1 && !s->continuation && !s->offered) {
        // No data cell to claim the slot with (an empty sample, or a row
        // without chunks): claimed here, and the chunks checked below.
        err = Claim(*s);
      }
      if (err.ok() && t->owner != s->attempt) {
        // Another attempt owns the data (or owned it and failed while this
        // one was discarding its copy).
        m_dupes++;
        if (t->owner != -1 || t->outstanding > 0) return;
        err = Status::ConnectionLost(fmt::format("sample {}: the attempt holding its data failed", FormatKey(t->key)));
      }
      if (err.ok()) {
        auto ps = r->paging_state();
        if (ps && !ps->empty()) {
          page_more = true;
          launches.push_back(Launch::NextPage(t, r->winning_execution, std::move(*ps), s->attempt));
        } else if (Status fin = t->placer.Finish(t->key); !fin.ok()) {
          err = fin;
        } else if (o.verify_checksums) {
          const uint64_t h = XXH64(t->base, static_cast<size_t>(t->size), 0);
          if (h != static_cast<uint64_t>(t->statics.checksum)) {
            err = Status::Corruption(fmt::format("sample {}: checksum mismatch (xxh64 {:016x}, stored {:016x})",
                                                 FormatKey(t->key), h, static_cast<uint64_t>(t->statics.checksum)));
          }
        }
      }
    }
    if (page_more) {
      // The rest of the sample follows on the same attempt.
    } else if (err.ok()) {
      latencies.Record(latency);
      ctl.OnComplete(t->size, latency);
      hedge_tokens = std::min(100.0, hedge_tokens + 0.05);
      if (s->attempt == t->hedge_attempt) m_hedge_wins++;
      CompleteTask(*t);
    } else {
      if (t->owner == s->attempt) {
        t->owner = -1;  // the slot stays reserved for the next attempt
      }
      if (t->outstanding == 0) HandleFailure(t, err);
    }
    Refill(&launches);
  }
  Start(std::move(launches));
}

void Loader::Impl::PumpLoop() {
  MutexLock lock(&mu);
  while (!closed) {
    pump_cv.WaitFor(&mu, std::chrono::milliseconds(2));
    if (closed) break;
    if (!started) continue;
    const auto now = Clock::now();
    std::vector<Launch> launches;
    // Retries that are due.
    while (!retries.empty() && retries.top().due <= now) {
      Retry r = retries.top();
      retries.pop();
      if (!r.task->resolved) launches.push_back(Launch::Retry(r.task, r.plan_offset));
    }
    // Hedges: attempts older than the adaptive threshold (the running p99,
    // at least 2 ms) get one more execution on the next replica/connection.
    auto p99 = latencies.Percentile(99.0, 200);
    while (!watch.empty()) {
      auto t = watch.front().task.lock();
      if (!t || t->resolved || t->outstanding == 0 || t->attempts > watch.front().attempt + 1) {
        watch.pop_front();
        continue;
      }
      if (!o.hedge || !p99) {
        if (watch.size() > 1000000) watch.pop_front();  // bound: no hedging yet
        break;
      }
      const auto delay = std::max<std::chrono::microseconds>(*p99, std::chrono::milliseconds(2));
      if (watch.front().issued + delay > now) break;
      watch.pop_front();
      // Hedges are budgeted (about 5% of completed requests) so that an
      // overloaded cluster is not sent even more work.
      if (!t->hedged && t->outstanding == 1 && hedge_tokens >= 1.0) {
        hedge_tokens -= 1.0;
        t->hedged = true;
        launches.push_back(Launch::Hedge(t, t->attempts));
      }
    }
    // Window control.
    const int conns_before = ctl.connections();
    ctl.Tick(now);
    const int conns = ctl.connections();
    // Rates for metrics (once a second).
    const double dt = std::chrono::duration<double>(now - rate_at).count();
    if (dt >= 1.0) {
      rate_images = static_cast<double>(m_images - rate_last_images) / dt;
      rate_bytes = static_cast<double>(m_bytes - rate_last_bytes) / dt;
      rate_last_images = m_images;
      rate_last_bytes = m_bytes;
      rate_at = now;
    }
    Refill(&launches);
    lock.Unlock();
    if (conns != conns_before) session->SetConnectionsPerHost(conns);
    Start(std::move(launches));
    lock.Lock();
  }
}

std::string Loader::Impl::DescribeKey(SampleKey k) { return store::DescribeSample(*session, path_stmt, k); }

// ============================================================================
// Loader
// ============================================================================

Loader::Loader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Loader::~Loader() { Close(); }

StatusOr<std::unique_ptr<Loader>> Loader::Open(LoaderOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  Status s = impl->Init();
  if (!s.ok()) {
    if (impl->session) impl->session->Close();
    return s;
  }
  return std::unique_ptr<Loader>(new Loader(std::move(impl)));
}

void Loader::Close() {
  if (!impl_) return;
  {
    MutexLock l(&impl_->mu);
    if (impl_->closed) return;
    impl_->closed = true;
  }
  impl_->pump_cv.SignalAll();
  impl_->ready_cv.SignalAll();
  if (impl_->pump.joinable()) impl_->pump.join();
  // Fails what is in flight; completions see `closed` and return.
  if (impl_->session) impl_->session->Close();
  MutexLock l(&impl_->mu);
  impl_->epochs.clear();
  while (!impl_->retries.empty()) impl_->retries.pop();
  impl_->watch.clear();
}

StatusOr<BatchPtr> Loader::Next() {
  Impl& L = *impl_;
  std::vector<Launch> launches;
  MutexLock lock(&L.mu);
  if (!L.started) {
    L.started = true;
    L.Refill(&launches);
    lock.Unlock();
    L.Start(std::move(launches));
    launches.clear();
    lock.Lock();
  }
  const auto t0 = Clock::now();
  bool waited = false;
  for (;;) {
    if (L.closed) return Status::Cancelled("loader closed");
    if (!L.epochs.empty() && !L.epochs.front()->errors.empty()) {
      auto [key, err] = L.epochs.front()->errors.front();
      L.epochs.front()->errors.pop_front();
      lock.Unlock();
      const std::string who = L.DescribeKey(key);
      return Status(err.code(), fmt::format("{} [{}]", err.message(), who), err.server_error_ptr());
    }
    if (L.epochs.empty()) {
      if (L.o.epochs > 0 && L.consumer_epoch >= L.o.epochs) {
        L.all_done = true;
        return BatchPtr();
      }
      L.Refill(&launches);  // creates the consumer's epoch
      if (L.epochs.empty()) return Status::Internal("no epoch to read");
    }
    Epoch& e = *L.epochs.front();
    std::shared_ptr<BatchImpl> b;
    if (!e.ordered && !e.ready.empty()) {
      // Only the last batch of an epoch may be short: the tail batch (fewer
      // samples left than a batch) can complete before the full batches
      // opened ahead of it, so it waits until it is the epoch's last.
      // (A batch shortened by skipped samples is not a tail: it goes at once.)
      auto it = e.ready.begin();
      if ((*it)->tail) {
        auto other = std::find_if(e.ready.begin(), e.ready.end(),
                                  [](const std::shared_ptr<BatchImpl>& r) { return !r->tail; });
        const bool more_coming = !e.building.empty() || e.unslotted > 0;
        if (other != e.ready.end()) {
          it = other;
        } else if (more_coming) {
          it = e.ready.end();
        }
      }
      if (it != e.ready.end()) {
        b = *it;
        e.ready.erase(it);
        b->index = e.base_batches + e.batches_delivered;
      }
    } else if (e.ordered && !e.ready_by_index.empty() && e.ready_by_index.begin()->first == e.next_ordered) {
      b = e.ready_by_index.begin()->second;
      e.ready_by_index.erase(e.ready_by_index.begin());
      e.next_ordered++;
      if (!b) continue;  // a batch whose every sample was skipped
      b->index = e.base_batches + e.batches_delivered;
    }
    if (b) {
      e.batches_delivered++;
      for (uint64_t s : b->seqs) e.MarkDone(s);
      L.m_images += static_cast<int64_t>(b->size());
      L.m_bytes += static_cast<int64_t>(b->used);
      L.m_batches++;
      if (waited) L.m_stall_s += std::chrono::duration<double>(Clock::now() - t0).count();
      L.pump_cv.Signal();
      lock.Unlock();
      L.Start(std::move(launches));
      return BatchPtr(std::move(b));
    }
    if (e.Finished() && e.next_seq == e.to_issue && e.errors.empty()) {
      L.epochs.pop_front();
      L.consumer_epoch++;
      if (L.o.epochs > 0 && L.consumer_epoch >= L.o.epochs) L.all_done = true;
      L.Refill(&launches);
      if (waited) L.m_stall_s += std::chrono::duration<double>(Clock::now() - t0).count();
      lock.Unlock();
      L.Start(std::move(launches));
      return BatchPtr();  // end of the epoch
    }
    if (!launches.empty()) {
      lock.Unlock();
      L.Start(std::move(launches));
      launches.clear();
      lock.Lock();
      continue;
    }
    waited = true;
    L.ready_cv.WaitFor(&L.mu, std::chrono::milliseconds(50));
  }
}

StatusOr<BatchPtr> Loader::Fetch(const std::vector<SampleKey>& keys) {
  Impl& L = *impl_;
  if (keys.size() > static_cast<size_t>(L.o.batch_size)) {
    return Status::InvalidArgument(
        fmt::format("fetch of {} keys: at most batch_size ({}) per call", keys.size(), L.o.batch_size));
  }
  std::map<int32_t, int64_t> counts;
  for (const auto& g : L.ds.segments) counts[g.seg] = g.count;
  for (SampleKey k : keys) {
    auto it = counts.find(KeySegment(k));
    if (it == counts.end() || KeyIndex(k) < 0 || KeyIndex(k) >= it->second) {
      return Status::NotFound(fmt::format("dataset '{}' has no sample {}", L.ds.name, FormatKey(k)));
    }
  }
  std::vector<Launch> launches;
  Epoch* e = nullptr;
  {
    MutexLock lock(&L.mu);
    if (L.closed) return Status::Cancelled("loader closed");
    auto ep = std::make_unique<Epoch>();
    ep->number = -1;
    ep->ordered = true;  // the batch holds the keys in the order asked for
    ep->keys = keys;
    ep->to_issue = ep->unslotted = ep->next_seq = keys.size();
    e = ep.get();
    L.fetches.push_back(std::move(ep));
    for (uint64_t i = 0; i < keys.size(); ++i) {
      auto t = std::make_shared<Task>();
      t->ep = e;
      t->seq = i;
      t->key = keys[i];
      L.in_flight++;
      L.in_flight_unslotted++;
      launches.push_back(Launch::First(std::move(t)));
    }
  }
  L.Start(std::move(launches));
  MutexLock lock(&L.mu);
  while (!L.closed && !(e->resolved == e->to_issue && e->building.empty())) L.ready_cv.Wait(&L.mu);
  auto self = std::find_if(L.fetches.begin(), L.fetches.end(), [&](const auto& p) { return p.get() == e; });
  std::unique_ptr<Epoch> mine = std::move(*self);
  L.fetches.erase(self);
  if (L.closed) return Status::Cancelled("loader closed");
  if (!mine->errors.empty()) {
    auto [key, err] = mine->errors.front();
    lock.Unlock();
    return Status(err.code(), fmt::format("{} [{}]", err.message(), L.DescribeKey(key)), err.server_error_ptr());
  }
  std::shared_ptr<BatchImpl> b;
  if (!mine->ready_by_index.empty()) b = mine->ready_by_index.begin()->second;
  if (!b) {
    // Every key was skipped (OnMissing::kSkip) or none was asked for.
    auto empty = std::make_shared<BatchImpl>();
    empty->epoch = -1;
    return BatchPtr(std::move(empty));
  }
  b->epoch = -1;
  b->index = 0;
  return BatchPtr(std::move(b));
}

bool Loader::Done() const {
  MutexLock l(&impl_->mu);
  return impl_->all_done;
}

int64_t Loader::SamplesPerEpoch() const {
  const uint64_t n = loader::RankSlice(impl_->source.size(), impl_->rank, impl_->world).size();
  if (!impl_->o.drop_last) return static_cast<int64_t>(n);
  const uint64_t b = static_cast<uint64_t>(impl_->o.batch_size);
  return static_cast<int64_t>(impl_->source.size() / static_cast<uint64_t>(impl_->world) / b * b);
}

int64_t Loader::BatchesPerEpoch() const {
  return impl_->BatchesFor(static_cast<uint64_t>(SamplesPerEpoch()));
}

int Loader::rank() const { return impl_->rank; }
int Loader::world_size() const { return impl_->world; }
const DatasetInfo& Loader::dataset() const { return impl_->ds; }

std::string Loader::State() const {
  Impl& L = *impl_;
  MutexLock lock(&L.mu);
  loader::Checkpoint cp;
  cp.fingerprint = L.source.Fingerprint();
  cp.seed = L.o.seed;
  cp.shuffle = L.o.shuffle;
  cp.drop_last = L.o.drop_last;
  cp.n = L.source.size();
  cp.world = L.world;
  cp.rank = L.rank;
  cp.batch_size = L.o.batch_size;
  if (L.epochs.empty()) {
    // Between epochs: the next one has not started.
    cp.epoch = L.consumer_epoch;
    cp.assigned = {loader::RankSlice(L.source.size(), L.rank, L.world)};
    return cp.Encode();
  }
  const Epoch& e = *L.epochs.front();
  cp.epoch = e.number;
  cp.assigned = loader::Normalize(e.plan.ranges());
  cp.batches_delivered = e.base_batches + e.batches_delivered;
  loader::Ranges done;
  // The prefix [0, done_wm) of the rank's sequence, as position ranges.
  uint64_t left = e.done_wm;
  for (const auto& r : e.plan.ranges()) {
    if (left == 0) break;
    const uint64_t take = std::min(left, r.size());
    done.push_back({r.begin, r.begin + take});
    left -= take;
  }
  for (uint64_t s : e.done_above) {
    const uint64_t p = e.plan.PositionAt(s);
    done.push_back({p, p + 1});
  }
  // Samples dropped by drop_last are not delivered but are not owed either.
  for (uint64_t s = e.to_issue; s < e.plan.size(); ++s) {
    const uint64_t p = e.plan.PositionAt(s);
    done.push_back({p, p + 1});
  }
  cp.done = loader::Normalize(std::move(done));
  return cp.Encode();
}

Status Loader::Restore(const std::vector<std::string>& states) {
  Impl& L = *impl_;
  std::vector<loader::Checkpoint> cps;
  for (const auto& s : states) {
    CQLS_ASSIGN_OR_RETURN(loader::Checkpoint c, loader::Checkpoint::Decode(s));
    cps.push_back(std::move(c));
  }
  if (cps.empty()) return Status::InvalidArgument("no checkpoint given");
  const auto& a = cps.front();
  if (a.fingerprint != L.source.Fingerprint() || a.n != L.source.size()) {
    return Status::InvalidArgument(
        "the checkpoint was taken over another sample set (different dataset, split, selection or segments)");
  }
  if (a.seed != L.o.seed || a.shuffle != L.o.shuffle) {
    return Status::InvalidArgument(fmt::format("the checkpoint was taken with seed {} shuffle {}; this loader has "
                                               "seed {} shuffle {}",
                                               a.seed, a.shuffle, L.o.seed, L.o.shuffle));
  }
  CQLS_ASSIGN_OR_RETURN(loader::Ranges remaining, loader::RemainingFor(cps, L.rank, L.world));
  MutexLock lock(&L.mu);
  if (L.started) return Status::InvalidArgument("Restore must be called before the first batch is read");
  const bool same = cps.size() == 1 && a.world == L.world && a.rank == L.rank;
  L.epochs.clear();
  L.consumer_epoch = a.epoch;
  L.next_epoch = a.epoch + 1;
  if (L.o.epochs > 0 && a.epoch >= L.o.epochs) {
    L.all_done = true;
    return Status::OK();
  }
  auto e = L.MakeEpoch(a.epoch, remaining, same ? a.batches_delivered : 0);
  if (!same && L.o.drop_last) {
    const uint64_t b = static_cast<uint64_t>(L.o.batch_size);
    e->to_issue = e->plan.size() / b * b;
    e->unslotted = e->to_issue;
  }
  L.epochs.push_back(std::move(e));
  return Status::OK();
}

LoaderMetrics Loader::Metrics() const {
  Impl& L = *impl_;
  LoaderMetrics m;
  auto sm = L.session->metrics();
  int connections = 0;
  for (const auto& h : L.session->Hosts()) connections += h.open_connections;
  MutexLock lock(&L.mu);
  m.images_per_s = L.rate_images;
  m.mb_per_s = L.rate_bytes / 1e6;
  m.images = L.m_images;
  m.bytes = L.m_bytes;
  m.batches = L.m_batches;
  m.in_flight = static_cast<int>(L.in_flight);
  m.window = L.ctl.window();
  m.connections = connections;
  m.bytes_in_flight = static_cast<int64_t>(static_cast<double>(L.in_flight_unslotted) * L.avg_size);
  m.memory_bytes = L.account->total();
  m.memory_budget = L.budget;
  if (auto p = L.latencies.Percentile(50, 1)) m.latency_p50_ms = static_cast<double>(p->count()) / 1000.0;
  if (auto p = L.latencies.Percentile(99, 1)) m.latency_p99_ms = static_cast<double>(p->count()) / 1000.0;
  m.retries = L.m_retries;
  m.hedges = L.m_hedges;
  m.hedge_wins = L.m_hedge_wins;
  m.timeouts = L.m_timeouts;
  m.duplicates_dropped = L.m_dupes;
  m.skipped = L.m_skipped;
  m.dropped = L.m_dropped;
  m.stall_s = L.m_stall_s;
  m.direct_bytes = static_cast<int64_t>(sm.direct_bytes);
  m.copied_bytes = static_cast<int64_t>(sm.copied_bytes);
  return m;
}

}  // namespace cqlstream
