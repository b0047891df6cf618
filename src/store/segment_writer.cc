// Copyright (c) cqlstream authors.
#include "store/segment_writer.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <utility>

#include "store/ingest.h"
#include "store/sample_row.h"
#include "store/scan.h"

namespace cqlstream::store {
namespace {

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

}  // namespace

struct SegmentWriter::Sample {
  int64_t pos = 0;
  int32_t idx = 0;
  std::shared_ptr<const SourceItem> item;
  // The payload's bytes, shared with the requests that write them (they
  // are spliced into the frames, not copied: cql/request.h).
  std::shared_ptr<const uint8_t[]> bytes;
  int64_t size = 0;
  int64_t image_size = 0;
  int64_t checksum = 0;
  int32_t chunks = 1;
  int32_t next_chunk = 0;  // chunk-by-chunk writes
  int attempts = 0;        // of the current statement
  int64_t reserved = 0;    // bytes of the budget held
};

std::shared_ptr<SegmentWriter> SegmentWriter::Create(net::Session& s, const SegmentWriteOptions& o,
                                                     const DatasetInfo& d, const IngestStatements& p,
                                                     const SegmentTarget& target, std::shared_ptr<ByteBudget> budget) {
  return std::make_shared<SegmentWriter>(s, o, d, p, target, std::move(budget));
}

SegmentWriter::SegmentWriter(net::Session& s, const SegmentWriteOptions& o, const DatasetInfo& d,
                             const IngestStatements& p, const SegmentTarget& target, std::shared_ptr<ByteBudget> budget)
    : s_(s), o_(o), d_(d), p_(p), target_(target), budget_(std::move(budget)) {
  MutexLock l(&mu_);
  committed_ = target.start;
  next_idx_ = static_cast<int32_t>(target.start.count);
  issued_end_ = target.start.count;
  next_pos_ = target.start.next_pos;
  last_written_ = target.start;
  last_ts_ = target.writetime;
}

net::Statement SegmentWriter::DataStatement(const Sample& smp, int32_t chunk, bool statics) const {
  const int64_t cs = d_.chunk_size;
  const int64_t off = static_cast<int64_t>(chunk) * cs;
  const int64_t len = std::min<int64_t>(cs, smp.size - off);
  std::vector<Value> v = {Value::Int(target_.seg), Value::Int(smp.idx), Value::Int(chunk),
                          Value::Shared({smp.bytes.get() + off, static_cast<size_t>(len)}, smp.bytes)};
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

void SegmentWriter::StartData(const SamplePtr& smp) {
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

void SegmentWriter::IssueChunked(const SamplePtr& smp) {
  auto self = shared_from_this();
  const int32_t c = smp->next_chunk;
  // The static columns go with the last chunk, after every other chunk.
  s_.ExecuteAsync(DataStatement(*smp, c, c == smp->chunks - 1),
                  [self, smp](StatusOr<net::ResultSet> r) { self->OnDataDone(smp, r.status(), 2); });
}

bool SegmentWriter::Retry(const SamplePtr& smp, const Status& st) {
  if (st.code() == Status::Code::kCancelled) return false;
  return ++smp->attempts < o_.write_attempts;
}

void SegmentWriter::OnDataDone(const SamplePtr& smp, const Status& st, int step) {
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
  // The payload is no longer needed: give its memory back (a hedge's frame
  // still queued on another connection holds it until it is written).
  smp->bytes.reset();
  budget_->Give(std::exchange(smp->reserved, 0));
  std::vector<Group> ready;
  {
    MutexLock l(&mu_);
    --data_inflight_;
    const int32_t block = smp->idx >> kBlockShift;
    if (--block_data_pending_[block] == 0) block_data_pending_.erase(block);
    meta_buf_[block].push_back(smp);
    TakeReadyLocked(&ready);
    // Nobody waits for data writes alone (Issue and Drain wait for inflight_).
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

net::Statement SegmentWriter::MetaStatement(const Sample& smp) const {
  const SourceItem& it = *smp.item;
  std::vector<Value> v = {Value::Int(target_.seg), Value::Int(smp.idx >> kBlockShift), Value::Int(smp.idx),
                          Value::Text(it.path), it.target_path.empty() ? Value::Unset() : Value::Text(it.target_path)};
  v.push_back(LabelValue(d_, it));
  v.push_back(LabelsValue(d_, it));
  v.push_back(Value::Bigint(smp.size));
  v.push_back(Value::Bigint(smp.image_size));
  v.push_back(Value::Bigint(smp.checksum));
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

void SegmentWriter::Complete(const SamplePtr& smp) {
  MutexLock l(&mu_);
  const int64_t front = pending_.front().pos;
  pending_[static_cast<size_t>(smp->pos - front)].done = true;
  AdvanceLocked();
  --inflight_;
  ++written_;
  written_bytes_ += smp->size;
  // Issue, waiting for a slot, is woken once `refill` slots are free (or
  // none is in flight: Drain), not for every sample: a wake-up of the
  // feeder per sample costs more CPU than a small sample's write.
  if (inflight_ + Refill() <= o_.concurrency || inflight_ == 0) cv_.SignalAll();
}

void SegmentWriter::Fail(const SamplePtr& smp, const Status& st, bool data_pending) {
  budget_->Give(std::exchange(smp->reserved, 0));
  std::vector<Group> ready;
  {
    MutexLock l(&mu_);
    if (error_.ok()) error_ = st;
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
    committed_.next_pos = e.pos + 1;
    pending_.pop_front();
  }
}

void SegmentWriter::Skip() {
  MutexLock l(&mu_);
  pending_.push_back(Entry{next_pos_++, -1, 0, true});
  AdvanceLocked();
}

StatusOr<int32_t> SegmentWriter::Issue(std::shared_ptr<const SourceItem> item, Payload payload, int64_t reserved,
                                       const std::function<bool()>& interrupted) {
  auto smp = std::make_shared<Sample>();
  smp->item = std::move(item);
  smp->size = static_cast<int64_t>(payload.size);
  smp->image_size = static_cast<int64_t>(payload.image_size);
  smp->checksum = static_cast<int64_t>(payload.xxh64 ? *payload.xxh64 : XXH64(payload.data.get(), payload.size, 0));
  const int64_t chunk_size = d_.chunk_size;
  smp->chunks = static_cast<int32_t>(std::max<int64_t>(1, (smp->size + chunk_size - 1) / chunk_size));
  smp->bytes = std::move(payload.data);
  smp->reserved = reserved;
  {
    MutexLock l(&mu_);
    // Complete wakes this once Refill() slots are free (Fail at once).
    const auto full = [this]() REQUIRES(mu_) { return inflight_ >= o_.concurrency && error_.ok(); };
    // Not issued (interrupted, or a write failed): the bytes go back.
    const Status refused = !cv_.WaitWhile(&mu_, full, interrupted) ? Status::Cancelled("interrupted") : error_;
    if (!refused.ok()) {
      l.Unlock();
      budget_->Give(std::exchange(smp->reserved, 0));
      return refused;
    }
    smp->pos = next_pos_++;
    smp->idx = next_idx_++;
    pending_.push_back(Entry{smp->pos, smp->idx, smp->size, false});
    ++inflight_;
    ++data_inflight_;
    ++block_data_pending_[smp->idx >> kBlockShift];
    issued_end_ = static_cast<int64_t>(smp->idx) + 1;
  }
  const int32_t idx = smp->idx;
  StartData(smp);
  return idx;
}

int64_t SegmentWriter::NextTimestamp() {
  last_ts_ = std::max(NowMicros(), last_ts_ + 1);
  return last_ts_;
}

Status SegmentWriter::Commit(bool seal) {
  const Committed c = committed();
  if (!seal && c == last_written_) return Status::OK();
  net::Statement st =
      SegmentCommitStatement(p_.commit, d_.name, target_.seg, c, seal, NextTimestamp(), NowMicros() / 1000);
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
  return last.WithContext(fmt::format("committing segment {} (count {})", target_.seg, c.count));
}

bool SegmentWriter::Drain(const std::function<bool()>& interrupted) {
  MutexLock l(&mu_);
  return cv_.WaitWhile(&mu_, [this]() REQUIRES(mu_) { return inflight_ != 0; }, interrupted);
}

Status SegmentWriter::error() const {
  MutexLock l(&mu_);
  return error_;
}

SegmentWriter::Counts SegmentWriter::counts() const {
  MutexLock l(&mu_);
  return Counts{written_, written_bytes_};
}

Committed SegmentWriter::committed() const {
  MutexLock l(&mu_);
  return committed_;
}

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

}  // namespace cqlstream::store
