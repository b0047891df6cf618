// Copyright (c) cqlstream authors.
//
// The writer of one segment's samples (docs/schema.md, "visibility"), shared
// by `cqlstream ingest` (store/ingest_segment.h feeds it from files) and the
// sample writer (store/sample_writer.h feeds it from memory).
//
// The caller hands it the segment's positions in order: each position is a
// sample (Issue) or a position handled without one (Skip, an invalid item).
// Each sample gets the next index and is written asynchronously: its data
// rows with store/sample_row.h's inserts (one INSERT; one unlogged
// single-partition batch below max_batch_bytes; else chunk by chunk with the
// static columns last), then its metadata row (rows of one metadata
// partition travel together, up to meta_batch per unlogged single-partition
// batch). The committed state (count, bytes, max_size, size_hist, next_pos)
// advances as a contiguous watermark over the handled positions; Commit
// writes it into the segment row (store/segments_table.h) and seals it when
// asked. Every write is idempotent (same key, same values), so rows written
// above a committed count by a run that crashed are simply rewritten by the
// next one.
//
// Memory: at most `concurrency` samples in flight (Issue waits for a slot);
// each sample holds its bytes of a ByteBudget until its data rows are
// written.
//
// Ownership: the writer keeps the session, the dataset and the statements by
// reference (they must outlive it, and every write: call Drain before
// dropping them); a sample's SourceItem is shared with the caller.
//
// Thread-safety: Skip, Issue, Commit and Drain are called from one thread at
// a time (the feeder); the session's I/O threads run the write callbacks;
// error(), counts() and committed() may be read from any thread.
#ifndef CQLSTREAM_STORE_SEGMENT_WRITER_H_
#define CQLSTREAM_STORE_SEGMENT_WRITER_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "cql/request.h"
#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "net/session.h"
#include "store/byte_budget.h"
#include "store/segments_table.h"
#include "store/source.h"
#include "util/mutex.h"

namespace cqlstream::store {

// The prepared statements of the writers of one dataset.
struct IngestStatements {
  net::PreparedPtr full;   // a data chunk with the static columns (DataInsertQuery)
  net::PreparedPtr chunk;  // a data chunk only (DataChunkInsertQuery)
  net::PreparedPtr meta;   // a metadata row
  SegmentCommitStatements commit;
};
StatusOr<IngestStatements> PrepareIngestStatements(net::Session& s, const DatasetInfo& d);

// How a segment's samples are written.
struct SegmentWriteOptions {
  int concurrency = 64;     // samples in flight
  cql::Consistency consistency = cql::Consistency::kLocalQuorum;
  int write_attempts = 3;   // per statement, on top of the session's retries
  int64_t max_batch_bytes = 8 << 20;  // payloads of this size or more: chunk by chunk
  int meta_batch = 32;      // metadata rows of one block per unlogged batch
};

// The segment to write: claimed (a new segment: start is zero) or resumed.
struct SegmentTarget {
  int32_t seg = -1;
  Committed start;        // its committed state when writing starts
  int64_t writetime = 0;  // its row's write time (commits go above it)
};

class SegmentWriter : public std::enable_shared_from_this<SegmentWriter> {
 public:
  // REQUIRES: target.seg >= 0.
  static std::shared_ptr<SegmentWriter> Create(net::Session& s, const SegmentWriteOptions& o, const DatasetInfo& d,
                                               const IngestStatements& p, const SegmentTarget& target,
                                               std::shared_ptr<ByteBudget> budget);

  // The next position (target.start.next_pos first, then one more per Skip
  // or Issue) is handled without a sample.
  void Skip() EXCLUDES(mu_);
  // The next position is the sample `item` (path, labels, target path, extra)
  // with `payload` (image bytes, then target bytes: payload.image_size),
  // holding `reserved` bytes of the budget. Waits while `concurrency`
  // samples are in flight. Returns the sample's index; after a write failed,
  // that error (the sample is not written, its bytes are given back, the
  // position is not handled). `interrupted` (may be empty) is asked, with no
  // lock held, before each wait of at most 50 ms for a slot: once it says
  // yes, Cancelled("interrupted") with nothing issued (the bytes given back,
  // the position not handled).
  StatusOr<int32_t> Issue(std::shared_ptr<const SourceItem> item, Payload payload, int64_t reserved,
                          const std::function<bool()>& interrupted = {}) EXCLUDES(mu_);
  // Writes the watermark into the segment row (unchanged and not sealing:
  // nothing is written); `seal` also seals the segment.
  Status Commit(bool seal) EXCLUDES(mu_);
  // Waits until every sample issued is written or failed. `interrupted`
  // (may be empty) is asked, with no lock held, before each wait of at most
  // 50 ms: once it says yes, returns false (the writes go on).
  bool Drain(const std::function<bool()>& interrupted = {}) EXCLUDES(mu_);

  // The first write that failed (after its attempts), or OK.
  Status error() const EXCLUDES(mu_);
  struct Counts {
    int64_t written = 0;  // samples whose rows are all written
    int64_t bytes = 0;    // their payload bytes
  };
  Counts counts() const EXCLUDES(mu_);
  // The watermark in memory (contiguous handled positions).
  Committed committed() const EXCLUDES(mu_);
  // What the segment row says: the last successful Commit (or the start).
  const Committed& last_written() const { return last_written_; }
  int32_t seg() const { return target_.seg; }
  // The position the next Skip / Issue handles.
  int64_t next_position() const { return next_pos_; }

  // Use Create.
  SegmentWriter(net::Session& s, const SegmentWriteOptions& o, const DatasetInfo& d, const IngestStatements& p,
                const SegmentTarget& target, std::shared_ptr<ByteBudget> budget);

 private:
  struct Sample;
  using SamplePtr = std::shared_ptr<Sample>;
  using Group = std::vector<SamplePtr>;

  void StartData(const SamplePtr& smp);
  void IssueChunked(const SamplePtr& smp);
  void OnDataDone(const SamplePtr& smp, const Status& st, int step) EXCLUDES(mu_);
  net::Statement DataStatement(const Sample& smp, int32_t chunk, bool statics) const;
  net::Statement MetaStatement(const Sample& smp) const;
  // Metadata rows of samples whose data is written wait in a buffer per
  // block (one partition) and go out as one unlogged batch.
  void TakeReadyLocked(std::vector<Group>* out) REQUIRES(mu_);
  void IssueMeta(Group group, int attempt);
  void Complete(const SamplePtr& smp) EXCLUDES(mu_);
  void Fail(const SamplePtr& smp, const Status& st, bool data_pending) EXCLUDES(mu_);
  bool Retry(const SamplePtr& smp, const Status& st);
  void AdvanceLocked() REQUIRES(mu_);
  int64_t NextTimestamp();
  // Free slots that wake an Issue waiting for one: an eighth of concurrency.
  int Refill() const { return std::max(1, o_.concurrency / 8); }

  net::Session& s_;
  const SegmentWriteOptions o_;
  const DatasetInfo& d_;
  const IngestStatements& p_;
  const SegmentTarget target_;
  const std::shared_ptr<ByteBudget> budget_;

  mutable Mutex mu_;
  CondVar cv_;
  int inflight_ GUARDED_BY(mu_) = 0;       // samples issued and not yet complete
  int data_inflight_ GUARDED_BY(mu_) = 0;  // of which the data rows are still being written
  std::map<int32_t, Group> meta_buf_ GUARDED_BY(mu_);          // block -> samples whose metadata row waits
  std::map<int32_t, int> block_data_pending_ GUARDED_BY(mu_);  // block -> samples whose data is being written
  int64_t issued_end_ GUARDED_BY(mu_) = 0;                     // one past the last index issued
  int32_t next_idx_ GUARDED_BY(mu_) = 0;                       // the index of the next sample
  int64_t written_ GUARDED_BY(mu_) = 0;
  int64_t written_bytes_ GUARDED_BY(mu_) = 0;
  Status error_ GUARDED_BY(mu_);
  // The watermark: positions handed in, in order.
  struct Entry {
    int64_t pos;
    int32_t idx;  // -1: handled without a sample
    int64_t size;
    bool done;
  };
  std::deque<Entry> pending_ GUARDED_BY(mu_);
  Committed committed_ GUARDED_BY(mu_);  // the contiguous prefix
  // The feeder's (one thread at a time).
  int64_t next_pos_ = 0;
  Committed last_written_;
  int64_t last_ts_ = 0;
};

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_SEGMENT_WRITER_H_
