// Copyright (c) cqlstream authors.
#include "store/segment_writer.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "store/sample_row.h"
#include "store/scan.h"
#include "util/mutex.h"

namespace cqlstream::store {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// The label and labels columns of an item (data and metadata rows alike):
// unset where the dataset's label kind has none.
Value LabelValue(const DatasetInfo& d, const SourceItem& it) {
  return d.label_kind == LabelKind::kClass && it.label >= 0 ? Value::Int(it.label) : Value::Unset();
}
Value LabelsValue(const DatasetInfo& d, const SourceItem& it) {
  if (d.label_kind != LabelKind::kMultiLabel || it.labels.empty()) return Value::Unset();
  std::vector<Value> l;
  for (int32_t x : it.labels) l.push_back(Value::Int(x));
  return Value::List(std::move(l));
}

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
  SegmentWriter(net::Session& s, const IngestOptions& o, const DatasetInfo& d, const IngestStatements& p,
                const SplitPlan& plan, IngestReport* report, IngestProgressState* progress)
      : s_(s), o_(o), d_(d), p_(p), plan_(plan), report_(report), shared_progress_(progress) {
    MutexLock l(&mu_);
    committed_ = plan.start;
    progress_ = progress->p;
    last_written_ = plan.start;
    last_ts_ = plan.writetime;
  }

  // Writes plan.items from plan.start.next_pos; *result gets the outcome.
  Status Run(SplitResult* result) EXCLUDES(mu_);

 private:
  // The coordinator's loop state (calling thread only).
  struct Loop {
    size_t pos = 0;
    int64_t issued = 0;
    int64_t since_commit = 0;
    Clock::time_point last_commit = Clock::now();
    bool crashed = false;
    bool interrupted = false;
    Status status;
  };
  enum class Await { kGot, kWaiting, kStop };

  // The coordinator's steps.
  Await AwaitItem(Loop& loop, ReadResult* rr) EXCLUDES(mu_);
  Status SkipItem(size_t pos, const std::string& reason, SplitResult* result) EXCLUDES(mu_);
  bool IssueItem(size_t pos, ReadResult rr) EXCLUDES(mu_);
  Status MaybeCommit(Loop& loop);
  Status Finish(const Loop& loop, SplitResult* result) EXCLUDES(mu_);

  // Readers.
  void ReaderLoop() EXCLUDES(mu_);
  void ScheduleReadsLocked(size_t pos) REQUIRES(mu_);

  // Writes (callbacks run on the session's I/O threads).
  void StartData(const std::shared_ptr<Sample>& smp);
  void IssueChunked(const std::shared_ptr<Sample>& smp);
  void OnDataDone(const std::shared_ptr<Sample>& smp, const Status& st, int step) EXCLUDES(mu_);
  using Group = std::vector<std::shared_ptr<Sample>>;
  net::Statement MetaStatement(const Sample& smp) const;
  // Metadata rows of samples whose data is written wait in a buffer per
  // block (one partition) and go out as one unlogged batch.
  void TakeReadyLocked(std::vector<Group>* out) REQUIRES(mu_);
  void IssueMeta(Group group, int attempt);
  void Complete(const std::shared_ptr<Sample>& smp) EXCLUDES(mu_);
  void Fail(const std::shared_ptr<Sample>& smp, const Status& st, bool data_pending) EXCLUDES(mu_);
  bool Retry(const std::shared_ptr<Sample>& smp, const Status& st);
  net::Statement DataStatement(const Sample& smp, int32_t chunk, bool statics) const;

  // The watermark.
  void AdvanceLocked() REQUIRES(mu_);
  Status Commit(bool seal) EXCLUDES(mu_);
  int64_t NextTimestamp() {
    last_ts_ = std::max(NowMicros(), last_ts_ + 1);
    return last_ts_;
  }
  void ReportProgress(bool force) EXCLUDES(mu_);

  net::Session& s_;
  const IngestOptions& o_;
  const DatasetInfo& d_;
  const IngestStatements& p_;
  const SplitPlan& plan_;
  IngestReport* report_;                    // skips: coordinator only
  IngestProgressState* shared_progress_;    // coordinator only (its counts are copied in and out of progress_)

  Mutex mu_;
  CondVar cv_;
  IngestProgress progress_ GUARDED_BY(mu_);  // the run's counts, also advanced by the I/O threads
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
  int32_t next_idx_ GUARDED_BY(mu_) = 0;                       // the index of the next valid item
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
  int64_t last_ts_ = 0;     // coordinator only
};

void SegmentWriter::ScheduleReadsLocked(size_t pos) {
  const size_t end = plan_.items.size();
  const size_t max_ahead = static_cast<size_t>(o_.concurrency) + static_cast<size_t>(o_.readers) * 4 + 8;
  if (read_limit_ < pos) read_limit_ = pos;
  while (read_limit_ < end && read_limit_ - pos < max_ahead) {
    const int64_t size = ListedSize(*plan_.items[read_limit_]);
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
    v.push_back(LabelValue(d_, *smp.item));
    v.push_back(LabelsValue(d_, *smp.item));
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
  v.push_back(LabelValue(d_, it));
  v.push_back(LabelsValue(d_, it));
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
  progress_.items_done++;
  progress_.bytes_done += smp->size;
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
  net::Statement st =
      SegmentCommitStatement(p_.commit, d_.name, plan_.seg, c, seal, NextTimestamp(), NowMicros() / 1000);
  st.consistency = o_.consistency;
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
  if (!force && now - shared_progress_->last_report < std::chrono::milliseconds(200)) return;
  shared_progress_->last_report = now;
  IngestProgress p;
  {
    MutexLock l(&mu_);
    p = progress_;
  }
  p.split = plan_.split;
  p.elapsed_s = Seconds(shared_progress_->start);
  o_.on_progress(p);
}

// Waits (up to 100 ms) for the read of loop.pos. kStop: a write failed or
// the simulated crash is due.
SegmentWriter::Await SegmentWriter::AwaitItem(Loop& loop, ReadResult* rr) {
  MutexLock l(&mu_);
  if (!error_.ok()) return Await::kStop;
  if (o_.crash_after >= 0 && loop.issued >= o_.crash_after) {
    loop.crashed = true;
    return Await::kStop;
  }
  ScheduleReadsLocked(loop.pos);
  const auto wake = Clock::now() + std::chrono::milliseconds(100);
  while (results_.count(loop.pos) == 0 && error_.ok() && cv_.WaitUntil(&mu_, wake)) {
  }
  if (!error_.ok()) return Await::kStop;
  auto it = results_.find(loop.pos);
  if (it == results_.end()) return Await::kWaiting;
  *rr = std::move(it->second);
  results_.erase(it);
  return Await::kGot;
}

// An item that turned out invalid: reported, its position handled (under
// --strict the run fails instead, and the watermark stops before it).
Status SegmentWriter::SkipItem(size_t pos, const std::string& reason, SplitResult* result) {
  report_->skips.push_back(IngestSkip{plan_.split, plan_.items[pos]->path, reason});
  result->skipped++;
  MutexLock l(&mu_);
  progress_.skipped++;
  progress_.items_done++;
  reserved_bytes_ -= reservation_[pos];
  reservation_.erase(pos);
  if (o_.strict) {
    return Status::Corruption(
        fmt::format("--strict: {} turned invalid while ingesting: {}", plan_.items[pos]->path, reason));
  }
  pending_.push_back(Entry{pos, -1, 0, true});
  AdvanceLocked();
  return Status::OK();
}

// A valid item: the next index, a slot among the samples in flight, and its
// data write. False when a write failed while waiting for the slot.
bool SegmentWriter::IssueItem(size_t pos, ReadResult rr) {
  auto smp = std::make_shared<Sample>();
  smp->pos = pos;
  smp->item = plan_.items[pos];
  smp->size = static_cast<int64_t>(rr.payload.size);
  smp->image_size = static_cast<int64_t>(rr.payload.image_size);
  smp->checksum = static_cast<int64_t>(XXH64(rr.payload.data.get(), rr.payload.size, 0));
  const int64_t chunk_size = d_.chunk_size;
  smp->chunks = static_cast<int32_t>(std::max<int64_t>(1, (smp->size + chunk_size - 1) / chunk_size));
  smp->payload = std::move(rr.payload);
  {
    MutexLock l(&mu_);
    while (inflight_ >= o_.concurrency && error_.ok()) cv_.Wait(&mu_);
    if (!error_.ok()) return false;
    smp->reserved = reservation_[pos];
    reservation_.erase(pos);
    smp->idx = next_idx_++;
    pending_.push_back(Entry{pos, smp->idx, smp->size, false});
    ++inflight_;
    ++data_inflight_;
    ++block_data_pending_[smp->idx >> kBlockShift];
    issued_end_ = static_cast<int64_t>(smp->idx) + 1;
  }
  StartData(smp);
  return true;
}

// A periodic commit of the watermark: every commit_interval, or every
// commit_every positions.
Status SegmentWriter::MaybeCommit(Loop& loop) {
  ++loop.since_commit;
  const bool by_count = o_.commit_every > 0 && loop.since_commit >= o_.commit_every;
  if (!by_count && Clock::now() - loop.last_commit < o_.commit_interval) return Status::OK();
  CQLS_RETURN_IF_ERROR(Commit(false));
  loop.last_commit = Clock::now();
  loop.since_commit = 0;
  return Status::OK();
}

Status SegmentWriter::Run(SplitResult* result) {
  const size_t end = plan_.items.size();
  Loop loop;
  loop.pos = static_cast<size_t>(plan_.start.next_pos);
  {
    MutexLock l(&mu_);
    next_read_ = read_limit_ = loop.pos;
    next_idx_ = static_cast<int32_t>(plan_.start.count);
  }
  std::vector<std::thread> readers;
  for (int i = 0; i < std::max(1, o_.readers); ++i) readers.emplace_back([this] { ReaderLoop(); });
  while (loop.pos < end) {
    if (o_.stop != nullptr && o_.stop->load()) {
      loop.interrupted = true;
      break;
    }
    ReadResult rr;
    const Await got = AwaitItem(loop, &rr);
    if (got == Await::kStop) break;
    if (got == Await::kWaiting) {
      ReportProgress(false);
      continue;
    }
    if (!rr.skip.empty()) {
      loop.status = SkipItem(loop.pos, rr.skip, result);
      if (!loop.status.ok()) break;
    } else {
      if (!IssueItem(loop.pos, std::move(rr))) break;
      ++loop.issued;
    }
    ++loop.pos;
    loop.status = MaybeCommit(loop);
    if (!loop.status.ok()) break;
    ReportProgress(false);
  }
  // Let what is in flight finish (every request ends: the session times out).
  {
    MutexLock l(&mu_);
    while (inflight_ != 0) cv_.Wait(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  for (auto& t : readers) t.join();
  return Finish(loop, result);
}

// After the loop: the final commit (sealed when every position was
// handled), the counts, and what the run returns.
Status SegmentWriter::Finish(const Loop& loop, SplitResult* result) {
  Status status = loop.status;
  {
    MutexLock l(&mu_);
    if (status.ok() && !error_.ok()) status = error_;
    result->written += written_;
    result->bytes += written_bytes_;
    shared_progress_->p = progress_;
  }
  ReportProgress(true);
  if (loop.crashed) {
    result->count = last_written_.count;
    return Status::Cancelled(fmt::format("simulated crash after {} samples (segment {} left as it was)", loop.issued,
                                         plan_.seg));
  }
  const bool complete = status.ok() && !loop.interrupted && loop.pos == plan_.items.size();
  Status c = Commit(complete);
  // What the segment row says: after a failed commit that is the last
  // successful one, not the in-memory watermark.
  result->count = last_written_.count;
  if (!status.ok()) return status;
  if (!c.ok()) return c;
  result->sealed = complete;
  if (loop.interrupted) {
    return Status::Cancelled(fmt::format("interrupted: segment {} of split '{}' committed {} samples; run the same "
                                         "command again to resume",
                                         plan_.seg, plan_.split, result->count));
  }
  return Status::OK();
}

}  // namespace

StatusOr<IngestStatements> PrepareIngestStatements(net::Session& s, const DatasetInfo& d) {
  IngestStatements p;
  CQLS_ASSIGN_OR_RETURN(p.full, s.Prepare(DataInsertQuery(d)));
  CQLS_ASSIGN_OR_RETURN(p.chunk, s.Prepare(DataChunkInsertQuery(d)));
  CQLS_ASSIGN_OR_RETURN(p.meta, s.Prepare(fmt::format("INSERT INTO {}.{} (seg, block, idx, path, target_path, label, "
                                                      "labels, size, image_size, checksum, extra) VALUES "
                                                      "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                                      d.keyspace, d.meta_table())));
  CQLS_ASSIGN_OR_RETURN(p.commit, PrepareSegmentCommit(s, d.keyspace));
  return p;
}

Status WriteSegment(net::Session& s, const IngestOptions& options, const DatasetInfo& d,
                    const IngestStatements& statements, const SplitPlan& plan, IngestReport* report,
                    IngestProgressState* progress, SplitResult* result) {
  auto writer = std::make_shared<SegmentWriter>(s, options, d, statements, plan, report, progress);
  return writer->Run(result);
}

}  // namespace cqlstream::store
