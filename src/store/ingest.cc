// Copyright (c) cqlstream authors.
#include "store/ingest.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

#include "store/catalog.h"
#include "store/scan.h"
#include "util/escape.h"
#include "util/mutex.h"

namespace cqlstream::store {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
int64_t NowMillis() { return NowMicros() / 1000; }

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

int64_t IntCell(const cql::Rows& r, int32_t row, int32_t col) {
  auto v = r.value(row, col);
  if (!v.ok()) return 0;
  if (v->kind() == Value::Kind::kInt) return v->as_int();
  if (v->kind() == Value::Kind::kBigint) return v->as_bigint();
  return 0;
}
std::string TextCell(const cql::Rows& r, int32_t row, int32_t col) {
  auto v = r.value(row, col);
  return v.ok() && v->kind() == Value::Kind::kText ? v->as_text() : std::string();
}

bool IsMissingTable(const Status& s) {
  const ServerError* e = s.server_error();
  return e != nullptr && e->typed() == ServerErrorCode::kInvalid &&
         (e->message.find("unconfigured table") != std::string::npos ||
          e->message.find("does not exist") != std::string::npos);
}

// The committed state of a segment (what its row says).
struct Committed {
  int64_t count = 0;
  int64_t bytes = 0;
  int64_t max_size = 0;
  int64_t next_pos = 0;
  std::vector<int64_t> hist = std::vector<int64_t>(64, 0);
  bool operator==(const Committed&) const = default;
};

// A row of the segments table, as ingest needs it.
struct SegRow {
  int32_t seg = 0;
  std::string split, source_id, fingerprint, state, source;
  Committed c;
  int64_t writetime = 0;
};

StatusOr<std::vector<SegRow>> ReadSegRows(net::Session& s, const std::string& ks, const std::string& dataset) {
  std::vector<SegRow> out;
  net::Statement st = net::Statement::Query(
      fmt::format("SELECT seg, split, source_id, fingerprint, count, bytes, max_size, size_hist, next_pos, state, "
                  "writetime(state), writetime(count), source FROM {}.segments WHERE dataset = ?",
                  ks),
      {Value::Text(dataset)});
  st.idempotent = true;
  st.consistency = cql::Consistency::kLocalQuorum;
  Status status = s.ForEachPage(st, [&](const cql::Rows& r) {
    for (int32_t i = 0; i < r.row_count(); ++i) {
      SegRow g;
      g.seg = static_cast<int32_t>(IntCell(r, i, 0));
      g.split = TextCell(r, i, 1);
      g.source_id = TextCell(r, i, 2);
      g.fingerprint = TextCell(r, i, 3);
      g.c.count = IntCell(r, i, 4);
      g.c.bytes = IntCell(r, i, 5);
      g.c.max_size = IntCell(r, i, 6);
      auto h = r.value(i, 7);
      if (h.ok() && h->kind() == Value::Kind::kList) {
        const auto& l = h->as_list();
        for (size_t b = 0; b < l.size() && b < 64; ++b) {
          g.c.hist[b] = l[b].kind() == Value::Kind::kBigint ? l[b].as_bigint() : 0;
        }
      }
      g.c.next_pos = IntCell(r, i, 8);
      g.state = TextCell(r, i, 9);
      g.writetime = std::max(IntCell(r, i, 10), IntCell(r, i, 11));
      g.source = TextCell(r, i, 12);
      out.push_back(std::move(g));
    }
    return Status::OK();
  });
  if (!status.ok()) {
    if (IsMissingTable(status)) return out;
    return status;
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.seg < b.seg; });
  return out;
}

std::vector<Value> HistValue(const std::vector<int64_t>& hist) {
  size_t n = hist.size();
  while (n > 0 && hist[n - 1] == 0) --n;
  std::vector<Value> out;
  for (size_t i = 0; i < n; ++i) out.push_back(Value::Bigint(hist[i]));
  return out;
}

enum class Action { kNew, kResume, kAppend, kComplete, kNothingNew };
std::string ActionName(Action a) {
  switch (a) {
    case Action::kNew: return "new";
    case Action::kResume: return "resumed";
    case Action::kAppend: return "appended";
    case Action::kComplete: return "complete";
    case Action::kNothingNew: return "nothing new";
  }
  return "?";
}

struct Plan {
  std::string split;
  std::string source_id;
  std::string fingerprint;
  std::vector<const SourceItem*> items;  // the segment's listing
  Action action = Action::kNew;
  int32_t seg = -1;
  Committed start;
  int64_t writetime = 0;
  std::vector<SegRow> supersede;  // open segments of the same source replaced by an append
  int64_t remaining_bytes() const {
    int64_t b = 0;
    for (size_t p = static_cast<size_t>(start.next_pos); p < items.size(); ++p) {
      b += static_cast<int64_t>(items[p]->image.size + (items[p]->target ? items[p]->target->size : 0));
    }
    return b;
  }
  size_t remaining() const { return items.size() - std::min(items.size(), static_cast<size_t>(start.next_pos)); }
  bool writes() const { return action == Action::kNew || action == Action::kResume || action == Action::kAppend; }
};

// Calls `fn(seg, row)` for every committed metadata row of `segs` (a scan
// of their metadata; `fn` runs under one lock).
Status ForEachCommittedRow(net::Session& s, const DatasetInfo& d, const std::vector<SegRow>& segs, int concurrency,
                           const std::function<void(int32_t seg, MetaRow& row)>& fn) {
  std::vector<SegmentInfo> infos;
  for (const auto& g : segs) {
    SegmentInfo i;
    i.seg = g.seg;
    i.split = g.split;
    i.count = g.c.count;
    infos.push_back(i);
  }
  Mutex mu;
  return ScanMeta(s, d, infos, concurrency, [&](const BlockRef& b, std::vector<MetaRow>& rows) {
    MutexLock l(&mu);
    for (auto& r : rows) fn(b.seg, r);
    return Status::OK();
  });
}

// Paths committed by `segs`.
StatusOr<std::set<std::string>> CommittedPaths(net::Session& s, const DatasetInfo& d, const std::vector<SegRow>& segs,
                                               int concurrency) {
  std::set<std::string> out;
  Status st = ForEachCommittedRow(s, d, segs, concurrency, [&](int32_t, MetaRow& r) { out.insert(std::move(r.path)); });
  if (!st.ok()) return st;
  return out;
}

// Refuses to write `items` into `split` when samples committed there by
// other sources have the same relative path and size: almost always the same
// files ingested again from another location (a copy, another mount point),
// which would silently double those samples in every epoch. Only new and
// appended segments are checked; a resume continues what was allowed.
Status CheckForeignPaths(net::Session& s, const IngestOptions& o, const DatasetInfo& d, const std::string& split,
                         const std::string& source_id, const std::vector<SegRow>& segrows,
                         const std::vector<const SourceItem*>& items, int concurrency) {
  if (o.allow_same_paths || items.empty()) return Status::OK();
  std::vector<SegRow> foreign;
  std::map<int32_t, std::string> origin;
  for (const auto& g : segrows) {
    if (g.split != split || g.source_id == source_id || g.c.count <= 0) continue;
    foreign.push_back(g);
    origin[g.seg] = g.source;
  }
  if (foreign.empty()) return Status::OK();
  std::map<std::string, const SourceItem*> wanted;
  for (const SourceItem* it : items) wanted.emplace(it->path, it);
  std::map<std::string, int32_t> hits;  // path -> a foreign segment holding it (sorted, each path once)
  Status st = ForEachCommittedRow(s, d, foreign, concurrency, [&](int32_t seg, MetaRow& r) {
    auto it = wanted.find(r.path);
    if (it != wanted.end() && static_cast<int64_t>(it->second->image.size) == r.image_size) hits.emplace(r.path, seg);
  });
  if (!st.ok()) return st;
  if (hits.empty()) return Status::OK();
  std::string examples;
  int shown = 0;
  for (auto h = hits.begin(); h != hits.end() && shown < 3; ++h, ++shown) {
    examples += fmt::format("{}{} (segment {})", shown ? ", " : "", h->first, h->second);
  }
  const std::string& from = origin[hits.begin()->second];
  return Status::AlreadyExists(fmt::format(
      "{} of the {} items to write into split '{}' of dataset '{}' have the same relative path and size as samples "
      "that another source already committed there (e.g. {}; ingested from {}): this looks like the same data "
      "from another location, which would be stored twice. Nothing was written. If the two sources really hold "
      "different images, pass --allow-same-paths",
      hits.size(), items.size(), split, o.dataset, examples, from.empty() ? "an unnamed source" : from));
}

// Progress shared by the splits of one run.
struct ProgressState {
  IngestProgress p;
  Clock::time_point start = Clock::now();
  Clock::time_point last_report{};
};

// --- the writer of one segment ---------------------------------------------------------

struct Prepared {
  net::PreparedPtr full;   // data chunk + static columns
  net::PreparedPtr chunk;  // data chunk only
  net::PreparedPtr meta;
  net::PreparedPtr update; // the segment's committed state
  net::PreparedPtr seal;   // the same + state = 'sealed'
};

struct ReadResult {
  Payload payload;
  std::string skip;
};

struct Sample {
  size_t pos = 0;
  int32_t idx = 0;
  const SourceItem* item = nullptr;
  Payload payload;
  int64_t size = 0;
  int64_t image_size = 0;
  int64_t checksum = 0;
  int32_t chunks = 1;
  int32_t next_chunk = 0;  // chunk-by-chunk writes
  int attempts = 0;        // of the current statement
  int64_t reserved = 0;    // bytes of the memory budget held
};

class SegmentWriter : public std::enable_shared_from_this<SegmentWriter> {
 public:
  SegmentWriter(net::Session& s, const IngestOptions& o, const DatasetInfo& d, const Prepared& p, Plan& plan,
                IngestReport* report, ProgressState* progress)
      : s_(s), o_(o), d_(d), p_(p), plan_(plan), report_(report), progress_(progress) {
    committed_ = plan.start;
    last_written_ = plan.start;
    last_ts_ = plan.writetime;
  }

  // Writes plan.items from plan.start.next_pos; *result gets the outcome.
  Status Run(SplitResult* result);

 private:
  // Readers.
  void ReaderLoop();
  int64_t ListedSize(size_t pos) const {
    const SourceItem* it = plan_.items[pos];
    return std::max<int64_t>(1, static_cast<int64_t>(it->image.size + (it->target ? it->target->size : 0)));
  }
  void ScheduleReadsLocked(size_t pos) REQUIRES(mu_);

  // Writes (callbacks run on the session's I/O threads).
  void StartData(const std::shared_ptr<Sample>& smp);
  void IssueChunked(const std::shared_ptr<Sample>& smp);
  void OnDataDone(const std::shared_ptr<Sample>& smp, const Status& st, int step);
  using Group = std::vector<std::shared_ptr<Sample>>;
  net::Statement MetaStatement(const Sample& smp) const;
  // Metadata rows of samples whose data is written wait in a buffer per
  // block (one partition) and go out as one unlogged batch.
  void TakeReadyLocked(std::vector<Group>* out) REQUIRES(mu_);
  void IssueMeta(Group group, int attempt);
  void Complete(const std::shared_ptr<Sample>& smp);
  void Fail(const std::shared_ptr<Sample>& smp, const Status& st, bool data_pending);
  bool Retry(const std::shared_ptr<Sample>& smp, const Status& st);
  net::Statement DataStatement(const Sample& smp, int32_t chunk, bool statics) const;

  // The watermark.
  void AdvanceLocked() REQUIRES(mu_);
  Status Commit(bool seal);
  int64_t NextTimestamp() {
    last_ts_ = std::max(NowMicros(), last_ts_ + 1);
    return last_ts_;
  }
  void ReportProgress(bool force);

  net::Session& s_;
  const IngestOptions& o_;
  const DatasetInfo& d_;
  const Prepared& p_;
  Plan& plan_;
  IngestReport* report_;
  ProgressState* progress_;

  // mu_ also guards progress_->p and report_->skips (shared with the I/O
  // threads' callbacks).
  Mutex mu_;
  CondVar cv_;
  // readers
  bool stopping_ GUARDED_BY(mu_) = false;
  size_t next_read_ GUARDED_BY(mu_) = 0;
  size_t read_limit_ GUARDED_BY(mu_) = 0;
  int64_t reserved_bytes_ GUARDED_BY(mu_) = 0;
  std::unordered_map<size_t, ReadResult> results_ GUARDED_BY(mu_);
  std::unordered_map<size_t, int64_t> reservation_ GUARDED_BY(mu_);  // pos -> bytes held
  // writes
  int inflight_ GUARDED_BY(mu_) = 0;       // samples issued and not yet complete
  int data_inflight_ GUARDED_BY(mu_) = 0;  // of which the data rows are still being written
  std::map<int32_t, Group> meta_buf_ GUARDED_BY(mu_);  // block -> samples whose metadata row waits
  std::map<int32_t, int> block_data_pending_ GUARDED_BY(mu_);  // block -> samples whose data is being written
  int64_t issued_end_ GUARDED_BY(mu_) = 0;                     // one past the last index issued
  int64_t written_ GUARDED_BY(mu_) = 0;
  int64_t written_bytes_ GUARDED_BY(mu_) = 0;
  Status error_ GUARDED_BY(mu_);
  // watermark: positions handed to the writer, in order
  struct Entry {
    size_t pos;
    int32_t idx;  // -1: skipped
    int64_t size;
    bool done;
  };
  std::deque<Entry> pending_ GUARDED_BY(mu_);
  Committed committed_ GUARDED_BY(mu_);  // the contiguous prefix
  Committed last_written_;  // what the segment row says (coordinator only)
  int64_t last_ts_ = 0;
};

void SegmentWriter::ScheduleReadsLocked(size_t pos) {
  const size_t end = plan_.items.size();
  const size_t max_ahead = static_cast<size_t>(o_.concurrency) + static_cast<size_t>(o_.readers) * 4 + 8;
  if (read_limit_ < pos) read_limit_ = pos;
  while (read_limit_ < end && read_limit_ - pos < max_ahead) {
    const int64_t size = ListedSize(read_limit_);
    if (read_limit_ > pos && reserved_bytes_ + size > o_.memory_bytes) break;
    reserved_bytes_ += size;
    reservation_[read_limit_] = size;
    ++read_limit_;
  }
  cv_.SignalAll();
}

void SegmentWriter::ReaderLoop() {
  for (;;) {
    size_t p;
    {
      MutexLock l(&mu_);
      while (!stopping_ && next_read_ >= read_limit_) cv_.Wait(&mu_);
      if (stopping_) return;
      p = next_read_++;
    }
    ReadResult r;
    r.skip = ReadItem(*plan_.items[p], &r.payload);
    MutexLock l(&mu_);
    if (r.skip.empty()) {
      // Hold what was really read.
      const int64_t actual = static_cast<int64_t>(r.payload.size);
      reserved_bytes_ += actual - reservation_[p];
      reservation_[p] = actual;
    }
    results_.emplace(p, std::move(r));
    cv_.SignalAll();
  }
}

net::Statement SegmentWriter::DataStatement(const Sample& smp, int32_t chunk, bool statics) const {
  const int64_t cs = d_.chunk_size;
  const int64_t off = static_cast<int64_t>(chunk) * cs;
  const int64_t len = std::min<int64_t>(cs, smp.size - off);
  std::vector<Value> v = {Value::Int(plan_.seg), Value::Int(smp.idx), Value::Int(chunk),
                          Value::Ref({smp.payload.data.get() + off, static_cast<size_t>(len)})};
  if (statics) {
    v.push_back(Value::Bigint(smp.size));
    v.push_back(Value::Bigint(smp.image_size));
    v.push_back(Value::Bigint(smp.checksum));
    v.push_back(d_.label_kind == LabelKind::kClass && smp.item->label >= 0 ? Value::Int(smp.item->label)
                                                                            : Value::Unset());
    if (d_.label_kind == LabelKind::kMultiLabel && !smp.item->labels.empty()) {
      std::vector<Value> l;
      for (int32_t x : smp.item->labels) l.push_back(Value::Int(x));
      v.push_back(Value::List(std::move(l)));
    } else {
      v.push_back(Value::Unset());
    }
  }
  net::Statement st = net::Statement::Bound(statics ? p_.full : p_.chunk, std::move(v));
  st.idempotent = true;
  st.consistency = o_.consistency;
  st.page_size = -1;
  if (smp.size > (4 << 20)) st.timeout = std::chrono::milliseconds(60000);
  return st;
}

void SegmentWriter::StartData(const std::shared_ptr<Sample>& smp) {
  auto self = shared_from_this();
  if (smp->chunks == 1) {
    s_.ExecuteAsync(DataStatement(*smp, 0, true),
                    [self, smp](StatusOr<net::ResultSet> r) { self->OnDataDone(smp, r.status(), 0); });
  } else if (smp->size < o_.max_batch_bytes) {
    // One unlogged batch: a single partition, so one mutation, applied atomically.
    std::vector<net::Statement> batch;
    for (int32_t c = 0; c < smp->chunks; ++c) batch.push_back(DataStatement(*smp, c, c == smp->chunks - 1));
    s_.ExecuteBatchAsync(cql::BatchType::kUnlogged, batch, o_.consistency,
                         [self, smp](StatusOr<net::ResultSet> r) { self->OnDataDone(smp, r.status(), 1); });
  } else {
    smp->next_chunk = 0;
    IssueChunked(smp);
  }
}

void SegmentWriter::IssueChunked(const std::shared_ptr<Sample>& smp) {
  auto self = shared_from_this();
  const int32_t c = smp->next_chunk;
  // The static columns go with the last chunk, after every other chunk.
  s_.ExecuteAsync(DataStatement(*smp, c, c == smp->chunks - 1),
                  [self, smp](StatusOr<net::ResultSet> r) { self->OnDataDone(smp, r.status(), 2); });
}

bool SegmentWriter::Retry(const std::shared_ptr<Sample>& smp, const Status& st) {
  if (st.code() == Status::Code::kCancelled) return false;
  return ++smp->attempts < o_.write_attempts;
}

void SegmentWriter::OnDataDone(const std::shared_ptr<Sample>& smp, const Status& st, int step) {
  if (!st.ok()) {
    if (!Retry(smp, st)) return Fail(smp, st.WithContext(fmt::format("writing data of {}", smp->item->path)), true);
    if (step == 2) return IssueChunked(smp);
    return StartData(smp);
  }
  smp->attempts = 0;
  if (step == 2 && smp->next_chunk + 1 < smp->chunks) {
    ++smp->next_chunk;
    return IssueChunked(smp);
  }
  // The payload is no longer needed: give its memory back to the readers.
  smp->payload = Payload();
  std::vector<Group> ready;
  {
    MutexLock l(&mu_);
    reserved_bytes_ -= smp->reserved;
    smp->reserved = 0;
    --data_inflight_;
    const int32_t block = smp->idx >> kBlockShift;
    if (--block_data_pending_[block] == 0) block_data_pending_.erase(block);
    meta_buf_[block].push_back(smp);
    TakeReadyLocked(&ready);
    cv_.SignalAll();
  }
  for (auto& g : ready) IssueMeta(std::move(g), 0);
}

void SegmentWriter::TakeReadyLocked(std::vector<Group>* out) {
  // A buffer goes out when it is full; when its block is closed (every index
  // of the block issued) and none of its data writes is pending; or when no
  // data write is pending at all (nothing else would fill it; this also
  // drains the end of the run).
  for (auto it = meta_buf_.begin(); it != meta_buf_.end();) {
    const int32_t block = it->first;
    const bool closed = issued_end_ >= (static_cast<int64_t>(block) + 1) << kBlockShift &&
                        block_data_pending_.count(block) == 0;
    if (!it->second.empty() &&
        (static_cast<int>(it->second.size()) >= o_.meta_batch || closed || data_inflight_ == 0)) {
      out->push_back(std::move(it->second));
      it = meta_buf_.erase(it);
    } else {
      ++it;
    }
  }
}

net::Statement SegmentWriter::MetaStatement(const Sample& sample) const {
  const Sample* smp = &sample;
  const SourceItem& it = *smp->item;
  std::vector<Value> v = {Value::Int(plan_.seg), Value::Int(smp->idx >> kBlockShift), Value::Int(smp->idx),
                          Value::Text(it.path), it.target_path.empty() ? Value::Unset() : Value::Text(it.target_path)};
  v.push_back(d_.label_kind == LabelKind::kClass && it.label >= 0 ? Value::Int(it.label) : Value::Unset());
  if (d_.label_kind == LabelKind::kMultiLabel && !it.labels.empty()) {
    std::vector<Value> l;
    for (int32_t x : it.labels) l.push_back(Value::Int(x));
    v.push_back(Value::List(std::move(l)));
  } else {
    v.push_back(Value::Unset());
  }
  v.push_back(Value::Bigint(smp->size));
  v.push_back(Value::Bigint(smp->image_size));
  v.push_back(Value::Bigint(smp->checksum));
  if (it.extra.empty()) {
    v.push_back(Value::Unset());
  } else {
    ValueMap m;
    for (const auto& [k, x] : it.extra) m.emplace_back(Value::Text(k), Value::Text(x));
    v.push_back(Value::Map(std::move(m)));
  }
  net::Statement st = net::Statement::Bound(p_.meta, std::move(v));
  st.idempotent = true;
  st.consistency = o_.consistency;
  st.page_size = -1;
  return st;
}

void SegmentWriter::IssueMeta(Group group, int attempt) {
  auto self = shared_from_this();
  auto g = std::make_shared<Group>(std::move(group));
  auto done = [self, g, attempt](StatusOr<net::ResultSet> r) {
    if (!r.ok()) {
      if (r.status().code() != Status::Code::kCancelled && attempt + 1 < self->o_.write_attempts) {
        return self->IssueMeta(std::move(*g), attempt + 1);
      }
      for (const auto& smp : *g) {
        self->Fail(smp, r.status().WithContext(fmt::format("writing metadata of {}", smp->item->path)), false);
      }
      return;
    }
    for (const auto& smp : *g) self->Complete(smp);
  };
  if (g->size() == 1) return s_.ExecuteAsync(MetaStatement(*g->front()), std::move(done));
  std::vector<net::Statement> batch;
  batch.reserve(g->size());
  for (const auto& smp : *g) batch.push_back(MetaStatement(*smp));
  // One partition (seg, block): a single mutation, applied atomically.
  s_.ExecuteBatchAsync(cql::BatchType::kUnlogged, batch, o_.consistency, std::move(done));
}

void SegmentWriter::Complete(const std::shared_ptr<Sample>& smp) {
  MutexLock l(&mu_);
  const size_t front = pending_.front().pos;
  pending_[smp->pos - front].done = true;
  AdvanceLocked();
  --inflight_;
  ++written_;
  written_bytes_ += smp->size;
  progress_->p.items_done++;
  progress_->p.bytes_done += smp->size;
  cv_.SignalAll();
}

void SegmentWriter::Fail(const std::shared_ptr<Sample>& smp, const Status& st, bool data_pending) {
  std::vector<Group> ready;
  {
    MutexLock l(&mu_);
    if (error_.ok()) error_ = st;
    reserved_bytes_ -= smp->reserved;
    smp->reserved = 0;
    --inflight_;
    if (data_pending) {
      --data_inflight_;
      const int32_t block = smp->idx >> kBlockShift;
      if (--block_data_pending_[block] == 0) block_data_pending_.erase(block);
      TakeReadyLocked(&ready);
    }
    cv_.SignalAll();
  }
  for (auto& g : ready) IssueMeta(std::move(g), 0);
}

void SegmentWriter::AdvanceLocked() {
  while (!pending_.empty() && pending_.front().done) {
    const Entry& e = pending_.front();
    if (e.idx >= 0) {
      committed_.count++;
      committed_.bytes += e.size;
      committed_.max_size = std::max(committed_.max_size, e.size);
      committed_.hist[static_cast<size_t>(SizeBucket(e.size))]++;
    }
    committed_.next_pos = static_cast<int64_t>(e.pos) + 1;
    pending_.pop_front();
  }
}

Status SegmentWriter::Commit(bool seal) {
  Committed c;
  {
    MutexLock l(&mu_);
    c = committed_;
  }
  if (!seal && c == last_written_) return Status::OK();
  net::Statement st = net::Statement::Bound(
      seal ? p_.seal : p_.update,
      {Value::Int(static_cast<int32_t>(c.count)), Value::Bigint(c.bytes), Value::Bigint(c.max_size),
       Value::List(HistValue(c.hist)), Value::Bigint(c.next_pos), Value::FromTimestamp(Timestamp{NowMillis()}),
       Value::Text(d_.name), Value::Int(plan_.seg)});
  st.idempotent = true;  // an explicit timestamp makes a repeated write a no-op
  st.consistency = o_.consistency;
  st.default_timestamp = NextTimestamp();
  Status last;
  for (int attempt = 0; attempt < std::max(1, o_.write_attempts); ++attempt) {
    auto r = s_.Execute(st);
    if (r.ok()) {
      last_written_ = c;
      return Status::OK();
    }
    last = r.status();
  }
  return last.WithContext(fmt::format("committing segment {} (count {})", plan_.seg, c.count));
}

void SegmentWriter::ReportProgress(bool force) {
  if (!o_.on_progress) return;
  const auto now = Clock::now();
  if (!force && now - progress_->last_report < std::chrono::milliseconds(200)) return;
  progress_->last_report = now;
  IngestProgress p;
  {
    MutexLock l(&mu_);
    p = progress_->p;
  }
  p.split = plan_.split;
  p.elapsed_s = Seconds(progress_->start);
  o_.on_progress(p);
}

Status SegmentWriter::Run(SplitResult* result) {
  const size_t end = plan_.items.size();
  size_t pos = static_cast<size_t>(plan_.start.next_pos);
  {
    MutexLock l(&mu_);
    next_read_ = read_limit_ = pos;
  }
  int32_t next_idx = static_cast<int32_t>(plan_.start.count);
  const int64_t chunk_size = d_.chunk_size;
  std::vector<std::thread> readers;
  for (int i = 0; i < std::max(1, o_.readers); ++i) readers.emplace_back([this] { ReaderLoop(); });

  auto last_commit = Clock::now();
  int64_t since_commit = 0;
  bool crashed = false, interrupted = false;
  int64_t issued = 0;
  Status status;
  while (pos < end) {
    if (o_.stop != nullptr && o_.stop->load()) {
      interrupted = true;
      break;
    }
    ReadResult rr;
    {
      MutexLock l(&mu_);
      if (!error_.ok()) break;
      if (o_.crash_after >= 0 && issued >= o_.crash_after) {
        crashed = true;
        break;
      }
      ScheduleReadsLocked(pos);
      const auto wake = Clock::now() + std::chrono::milliseconds(100);
      while (results_.count(pos) == 0 && error_.ok() && cv_.WaitUntil(&mu_, wake)) {
      }
      if (results_.count(pos) == 0 && error_.ok()) {
        l.Unlock();
        ReportProgress(false);
        continue;
      }
      if (!error_.ok()) break;
      auto it = results_.find(pos);
      rr = std::move(it->second);
      results_.erase(it);
    }
    if (!rr.skip.empty()) {
      MutexLock l(&mu_);
      report_->skips.push_back(IngestSkip{plan_.split, plan_.items[pos]->path, rr.skip});
      result->skipped++;
      progress_->p.skipped++;
      progress_->p.items_done++;
      reserved_bytes_ -= reservation_[pos];
      reservation_.erase(pos);
      if (o_.strict) {
        // The watermark never passes a skipped position under --strict.
        status = Status::Corruption(fmt::format("--strict: {} turned invalid while ingesting: {}",
                                                plan_.items[pos]->path, rr.skip));
        break;
      }
      pending_.push_back(Entry{pos, -1, 0, true});
      AdvanceLocked();
    } else {
      auto smp = std::make_shared<Sample>();
      smp->pos = pos;
      smp->item = plan_.items[pos];
      smp->size = static_cast<int64_t>(rr.payload.size);
      smp->image_size = static_cast<int64_t>(rr.payload.image_size);
      smp->checksum = static_cast<int64_t>(XXH64(rr.payload.data.get(), rr.payload.size, 0));
      smp->chunks = static_cast<int32_t>(std::max<int64_t>(1, (smp->size + chunk_size - 1) / chunk_size));
      smp->payload = std::move(rr.payload);
      {
        MutexLock l(&mu_);
        while (inflight_ >= o_.concurrency && error_.ok()) cv_.Wait(&mu_);
        if (!error_.ok()) break;
        smp->reserved = reservation_[pos];
        reservation_.erase(pos);
        smp->idx = next_idx++;
        pending_.push_back(Entry{pos, smp->idx, smp->size, false});
        ++inflight_;
        ++data_inflight_;
        ++block_data_pending_[smp->idx >> kBlockShift];
        issued_end_ = static_cast<int64_t>(smp->idx) + 1;
      }
      StartData(smp);
      ++issued;
    }
    ++pos;
    ++since_commit;
    const bool by_count = o_.commit_every > 0 && since_commit >= o_.commit_every;
    if (by_count || Clock::now() - last_commit >= o_.commit_interval) {
      Status c = Commit(false);
      if (!c.ok()) {
        status = c;
        break;
      }
      last_commit = Clock::now();
      since_commit = 0;
    }
    ReportProgress(false);
  }
  // Let what is in flight finish (every request ends: the session times out).
  {
    MutexLock l(&mu_);
    while (inflight_ != 0) cv_.Wait(&mu_);
    stopping_ = true;
    cv_.SignalAll();
    if (status.ok() && !error_.ok()) status = error_;
    result->written += written_;
    result->bytes += written_bytes_;
  }
  for (auto& t : readers) t.join();
  ReportProgress(true);
  if (crashed) {
    result->count = last_written_.count;
    return Status::Cancelled(fmt::format("simulated crash after {} samples (segment {} left as it was)", issued,
                                         plan_.seg));
  }
  const bool complete = status.ok() && !interrupted && pos == end;
  Status c = Commit(complete);
  // What the segment row says: after a failed commit that is the last
  // successful one, not the in-memory watermark.
  result->count = last_written_.count;
  if (!status.ok()) return status;
  if (!c.ok()) return c;
  result->sealed = complete;
  if (interrupted) {
    return Status::Cancelled(fmt::format("interrupted: segment {} of split '{}' committed {} samples; run the same "
                                         "command again to resume",
                                         plan_.seg, plan_.split, result->count));
  }
  return Status::OK();
}

// --- the run ------------------------------------------------------------------------------

Status PrepareStatements(net::Session& s, const DatasetInfo& d, Prepared* p) {
  const std::string dt = d.keyspace + "." + d.data_table();
  const std::string mt = d.keyspace + "." + d.meta_table();
  CQLS_ASSIGN_OR_RETURN(p->full, s.Prepare(fmt::format("INSERT INTO {} (seg, idx, chunk, data, size, image_size, "
                                                       "checksum, label, labels) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                                       dt)));
  CQLS_ASSIGN_OR_RETURN(p->chunk, s.Prepare(fmt::format("INSERT INTO {} (seg, idx, chunk, data) VALUES (?, ?, ?, ?)", dt)));
  CQLS_ASSIGN_OR_RETURN(p->meta, s.Prepare(fmt::format("INSERT INTO {} (seg, block, idx, path, target_path, label, "
                                                       "labels, size, image_size, checksum, extra) VALUES "
                                                       "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                                       mt)));
  const std::string set = "count = ?, bytes = ?, max_size = ?, size_hist = ?, next_pos = ?, updated = ?";
  CQLS_ASSIGN_OR_RETURN(
      p->update, s.Prepare(fmt::format("UPDATE {}.segments SET {} WHERE dataset = ? AND seg = ?", d.keyspace, set)));
  CQLS_ASSIGN_OR_RETURN(p->seal, s.Prepare(fmt::format("UPDATE {}.segments SET {}, state = 'sealed' WHERE dataset = ? "
                                                       "AND seg = ?",
                                                       d.keyspace, set)));
  return Status::OK();
}

// Claims the next free segment number with a lightweight transaction, so
// that shards on several machines never collide.
Status ClaimSegment(net::Session& s, const IngestOptions& o, const std::string& source_desc, Plan* plan) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    CQLS_ASSIGN_OR_RETURN(auto rows, ReadSegRows(s, o.keyspace, o.dataset));
    int32_t seg = 0;
    for (const auto& g : rows) seg = std::max(seg, g.seg + 1);
    const int64_t now = NowMillis();
    net::Statement st = net::Statement::Query(
        fmt::format("INSERT INTO {}.segments (dataset, seg, split, source_id, source, fingerprint, count, bytes, "
                    "max_size, next_pos, state, created, updated) VALUES (?, ?, ?, ?, ?, ?, 0, 0, 0, 0, 'open', ?, ?) "
                    "IF NOT EXISTS",
                    o.keyspace),
        {Value::Text(o.dataset), Value::Int(seg), Value::Text(plan->split), Value::Text(plan->source_id),
         Value::Text(source_desc), Value::Text(plan->fingerprint), Value::FromTimestamp(Timestamp{now}),
         Value::FromTimestamp(Timestamp{now})});
    st.consistency = cql::Consistency::kLocalQuorum;
    st.timeout = std::chrono::milliseconds(30000);
    auto r = s.Execute(st);
    if (!r.ok()) return r.status().WithContext("claiming a segment");
    const cql::Rows* rr = r->rows();
    bool applied = false;
    if (rr != nullptr && rr->row_count() > 0) {
      auto v = rr->value(0, 0);
      applied = v.ok() && v->kind() == Value::Kind::kBoolean && v->as_bool();
    }
    if (!applied) continue;
    plan->seg = seg;
    plan->start = Committed();
    // Our timestamps must start above the transaction's own.
    CQLS_ASSIGN_OR_RETURN(auto after, ReadSegRows(s, o.keyspace, o.dataset));
    for (const auto& g : after) {
      if (g.seg == seg) plan->writetime = g.writetime;
    }
    return Status::OK();
  }
  return Status::Internal("could not claim a segment number after 1000 attempts");
}

// Seals open segments that an append replaces (they can never be resumed).
Status Supersede(net::Session& s, const IngestOptions& o, const SegRow& g) {
  net::Statement st = net::Statement::Query(
      fmt::format("UPDATE {}.segments SET state = 'sealed', updated = ? WHERE dataset = ? AND seg = ?", o.keyspace),
      {Value::FromTimestamp(Timestamp{NowMillis()}), Value::Text(o.dataset), Value::Int(g.seg)});
  st.consistency = o.consistency;
  st.idempotent = true;
  st.default_timestamp = std::max(NowMicros(), g.writetime + 1);
  auto r = s.Execute(st);
  return r.status();
}

Status CheckOptions(const IngestOptions& o) {
  CQLS_RETURN_IF_ERROR(ValidateGeneratedKeyspace(o.keyspace));
  CQLS_RETURN_IF_ERROR(ValidateDatasetName(o.dataset));
  if (o.concurrency < 1 || o.concurrency > 4096) {
    return Status::InvalidArgument(fmt::format("--concurrency {} must be in 1..4096", o.concurrency));
  }
  if (o.memory_bytes < (1 << 20)) return Status::InvalidArgument("--memory-mb must be at least 1");
  if (o.readers < 1 || o.readers > 256) return Status::InvalidArgument("reader threads must be in 1..256");
  if (o.meta_batch < 1 || o.meta_batch > 1024) return Status::InvalidArgument("meta_batch must be in 1..1024");
  if (o.write_attempts < 1) return Status::InvalidArgument("write_attempts must be at least 1");
  if (o.chunk_size && (*o.chunk_size < 1024 || *o.chunk_size > (16 << 20))) {
    return Status::InvalidArgument(
        fmt::format("--chunk-size {} must be between 1024 and 16777216 bytes", *o.chunk_size));
  }
  if (o.shard_count < 1 || o.shard_index < 0 || o.shard_index >= o.shard_count) {
    return Status::InvalidArgument("--shard i/N needs 0 <= i < N");
  }
  return Status::OK();
}

}  // namespace

int SizeBucket(int64_t size) {
  if (size <= 0) return 0;
  return 63 - std::countl_zero(static_cast<uint64_t>(size));
}

std::string IngestReport::FormatSkips(size_t per_reason) const {
  std::map<std::string, std::vector<const IngestSkip*>> by;
  for (const auto& s : skips) by[s.reason].push_back(&s);
  std::vector<std::pair<std::string, std::vector<const IngestSkip*>>> sorted(by.begin(), by.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  std::string out;
  for (const auto& [reason, list] : sorted) {
    out += fmt::format("  {} ({}):\n", PrintableText(reason), list.size());
    for (size_t i = 0; i < list.size() && i < per_reason; ++i) {
      out += fmt::format("    {}: {}\n", PrintableText(list[i]->split), PrintableText(list[i]->path));
    }
    if (list.size() > per_reason) out += fmt::format("    ... and {} more\n", list.size() - per_reason);
  }
  out += fmt::format("  total skipped: {}\n", skips.size());
  return out;
}

Status Ingest(net::Session& s, const IngestOptions& o, IngestReport* report) {
  const auto t0 = Clock::now();
  *report = IngestReport();
  report->dataset = o.dataset;
  CQLS_RETURN_IF_ERROR(CheckOptions(o));
  auto note = [&](const std::string& n) {
    report->notes.push_back(n);
    if (o.on_note) o.on_note(n);
  };

  // 1. The source, completely listed before anything is written.
  CQLS_ASSIGN_OR_RETURN(SourceListing listing, ListSource(o.source));
  for (const auto& n : listing.notes) note(n);
  if (listing.items.empty()) {
    return Status::InvalidArgument(fmt::format("source '{}' lists no items", listing.description));
  }

  // 2. The dataset as it exists (read only).
  std::optional<DatasetInfo> existing;
  {
    auto d = LoadDataset(s, o.keyspace, o.dataset);
    if (d.ok()) {
      existing = std::move(d).value();
    } else if (!d.status().IsNotFound()) {
      return d.status();
    }
  }
  std::vector<SegRow> segrows;
  if (existing) {
    CQLS_ASSIGN_OR_RETURN(segrows, ReadSegRows(s, o.keyspace, o.dataset));
  } else {
    CQLS_ASSIGN_OR_RETURN(auto leftovers, ReadSegRows(s, o.keyspace, o.dataset));
    if (!leftovers.empty()) {
      return Status::AlreadyExists(fmt::format(
          "dataset '{}' has no catalog entry but {} segment rows remain (an interrupted drop?); run "
          "'cqlstream drop {}' first",
          o.dataset, leftovers.size(), o.dataset));
    }
  }

  // 3. Labels and the class mapping.
  DatasetSpec spec;
  spec.name = o.dataset;
  spec.label_kind = listing.label_kind;
  spec.chunk_size = o.chunk_size.value_or(kDefaultChunkSize);
  spec.chunk_size_given = o.chunk_size.has_value();
  spec.description = o.description;
  const bool labelled = spec.label_kind == LabelKind::kClass || spec.label_kind == LabelKind::kMultiLabel;
  std::vector<std::string> mapping;
  if (labelled) {
    std::vector<std::string> used = UsedLabelTexts(listing);
    {
      // The mapping covers the whole source, every split included.
      std::set<std::string> all(used.begin(), used.end());
      all.insert(listing.folder_classes.begin(), listing.folder_classes.end());
      all.insert(listing.all_label_texts.begin(), listing.all_label_texts.end());
      used.assign(all.begin(), all.end());
    }
    if (existing) {
      spec.class_names = used;  // checked against the stored mapping
      mapping = existing->class_names;
    } else {
      mapping = listing.kind == SourceKind::kFolder ? used : BuildClassMapping(used);
      spec.class_names = mapping;
    }
  }
  if (existing) CQLS_RETURN_IF_ERROR(CheckCompatible(*existing, spec));
  CQLS_RETURN_IF_ERROR(ResolveLabels(spec.label_kind, mapping, &listing));
  // Sizes the server would refuse, before any DDL (no orphan tables).
  CQLS_RETURN_IF_ERROR(CheckSpecSizes(spec));
  for (const auto& it : listing.items) {
    if (it.labels.size() > kMaxLabelsPerSample) {
      return Status::InvalidArgument(fmt::format("'{}' has {} labels (at most {} per sample): nothing was written",
                                                 it.path, it.labels.size(), kMaxLabelsPerSample));
    }
  }
  report->label_kind = spec.label_kind;
  report->class_names = mapping;

  // 4. One plan per split.
  std::vector<Plan> plans;
  const int scan_concurrency = std::max(4, std::min(o.concurrency, 32));
  for (const auto& split : ListingSplits(listing)) {
    Plan plan;
    plan.split = split;
    const auto positions = SplitPositions(listing, split);
    std::vector<const SourceItem*> shard;
    for (size_t p : ShardPositions(positions.size(), o.shard_index, o.shard_count)) {
      shard.push_back(&listing.items[positions[p]]);
    }
    plan.source_id = SourceId(o.dataset, split, listing.canonical, o.shard_index, o.shard_count);
    plan.fingerprint = Fingerprint(shard);
    std::vector<SegRow> same;
    const SegRow* exact = nullptr;
    for (const auto& g : segrows) {
      if (g.source_id != plan.source_id || g.split != split) continue;
      same.push_back(g);
    }
    for (const auto& g : same) {
      if (g.fingerprint == plan.fingerprint) exact = &g;  // the latest
    }
    std::vector<SegRow> others;
    for (const auto& g : same) {
      if (exact == nullptr || g.seg != exact->seg) others.push_back(g);
    }
    if (exact != nullptr && exact->state == "sealed") {
      plan.action = Action::kComplete;
      plan.seg = exact->seg;
      plan.start = exact->c;
    } else {
      std::set<std::string> present;
      if (!others.empty()) {
        CQLS_ASSIGN_OR_RETURN(present, CommittedPaths(s, *existing, others, scan_concurrency));
      }
      for (const SourceItem* it : shard) {
        if (!present.count(it->path)) plan.items.push_back(it);
      }
      if (exact != nullptr) {
        plan.action = Action::kResume;
        plan.seg = exact->seg;
        plan.start = exact->c;
        plan.writetime = exact->writetime;
        if (plan.start.next_pos > static_cast<int64_t>(plan.items.size()) ||
            plan.start.count > plan.start.next_pos) {
          return Status::Corruption(fmt::format(
              "segment {} of dataset '{}' says next_pos {} / count {}, but its listing has {} items", exact->seg,
              o.dataset, plan.start.next_pos, plan.start.count, plan.items.size()));
        }
      } else if (!same.empty()) {
        plan.action = plan.items.empty() ? Action::kNothingNew : Action::kAppend;
        CQLS_RETURN_IF_ERROR(CheckForeignPaths(s, o, *existing, split, plan.source_id, segrows, plan.items,
                                               scan_concurrency));
        for (const auto& g : same) {
          if (g.state != "sealed") plan.supersede.push_back(g);
        }
      } else {
        plan.action = Action::kNew;
        if (existing) {
          CQLS_RETURN_IF_ERROR(CheckForeignPaths(s, o, *existing, split, plan.source_id, segrows, plan.items,
                                                 scan_concurrency));
        }
      }
    }
    plans.push_back(std::move(plan));
  }

  ProgressState progress;
  for (const auto& p : plans) {
    if (!p.writes()) continue;
    progress.p.items_total += static_cast<int64_t>(p.remaining());
    progress.p.bytes_total += p.remaining_bytes();
  }

  // 5. --strict: validate everything that remains before writing anything.
  if (o.strict) {
    std::vector<std::pair<size_t, size_t>> todo;  // (plan, position)
    for (size_t i = 0; i < plans.size(); ++i) {
      if (!plans[i].writes()) continue;
      for (size_t p = static_cast<size_t>(plans[i].start.next_pos); p < plans[i].items.size(); ++p) {
        todo.emplace_back(i, p);
      }
    }
    std::vector<std::string> reasons(todo.size());
    Status st = ParallelFor(
        todo.size(), o.readers,
        [&](size_t k) {
          Payload pl;
          reasons[k] = ReadItem(*plans[todo[k].first].items[todo[k].second], &pl);
          return Status::OK();
        },
        o.stop);
    if (!st.ok()) return st;
    for (size_t k = 0; k < todo.size(); ++k) {
      if (reasons[k].empty()) continue;
      const Plan& p = plans[todo[k].first];
      report->skips.push_back(IngestSkip{p.split, p.items[todo[k].second]->path, reasons[k]});
    }
    if (!report->skips.empty()) {
      report->seconds = Seconds(t0);
      return Status::Corruption(fmt::format("--strict: {} item{} would be skipped; nothing was written",
                                            report->skips.size(), report->skips.size() > 1 ? "s" : ""));
    }
  }

  // 6. Schema: keyspace, catalog, dataset (only when something is written).
  bool any_writes = false;
  for (const auto& p : plans) any_writes = any_writes || p.writes();
  DatasetInfo d;
  if (any_writes || !existing) {
    std::string ks_note;
    CQLS_RETURN_IF_ERROR(EnsureKeyspace(s, o.keyspace, o.replication, o.replication_given, &ks_note));
    if (!ks_note.empty()) note(ks_note);
    CQLS_RETURN_IF_ERROR(EnsureCatalog(s, o.keyspace));
    bool created = false;
    CQLS_ASSIGN_OR_RETURN(d, CreateOrOpenDataset(s, o.keyspace, spec, &created));
    report->created_dataset = created;
    if (created) {
      note(fmt::format("created dataset '{}' (label kind {}, {} classes, chunk size {})", o.dataset,
                       LabelKindName(spec.label_kind), mapping.size(), d.chunk_size));
    }
  } else {
    d = *existing;
  }
  report->chunk_size = d.chunk_size;
  Prepared prepared;
  if (any_writes) CQLS_RETURN_IF_ERROR(PrepareStatements(s, d, &prepared));

  // 7. Write, split after split.
  const std::string source_desc =
      o.shard_count > 1 ? fmt::format("{} (shard {}/{})", listing.description, o.shard_index, o.shard_count)
                        : listing.description;
  Status result;
  for (auto& plan : plans) {
    SplitResult r;
    r.split = plan.split;
    r.action = ActionName(plan.action);
    r.listed = static_cast<int64_t>(plan.items.size());
    r.start_count = r.count = plan.start.count;
    r.seg = plan.seg;
    r.sealed = plan.action == Action::kComplete;
    if (!plan.writes()) {
      report->splits.push_back(r);
      continue;
    }
    if (!result.ok()) {
      r.action = "not started";
      report->splits.push_back(r);
      continue;
    }
    if (o.stop != nullptr && o.stop->load()) {
      result = Status::Cancelled("interrupted before split '" + plan.split + "'");
      r.action = "not started";
      report->splits.push_back(r);
      continue;
    }
    for (const auto& g : plan.supersede) CQLS_RETURN_IF_ERROR(Supersede(s, o, g));
    if (plan.action != Action::kResume) CQLS_RETURN_IF_ERROR(ClaimSegment(s, o, source_desc, &plan));
    r.seg = plan.seg;
    auto writer = std::make_shared<SegmentWriter>(s, o, d, prepared, plan, report, &progress);
    Status st = writer->Run(&r);
    report->written += r.written;
    report->bytes += r.bytes;
    report->splits.push_back(r);
    if (!st.ok()) result = st;
  }
  report->seconds = Seconds(t0);
  return result;
}

}  // namespace cqlstream::store
