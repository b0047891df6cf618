// Copyright (c) cqlstream authors.
//
// Ingest: writes a source (see source.h) into a dataset following the
// visibility protocol of docs/schema.md.
//
// Per split of the source, one segment (per run and shard):
//   1. list the source, compute source_id and fingerprint of the shard's
//      listing; a segment with the same source_id and fingerprint is resumed
//      (open) or reported complete (sealed); a changed listing under the same
//      source_id writes only the paths not yet committed by that source into
//      a new segment;
//   2. reader threads read and validate items ahead of the writer (bounded by
//      items and by bytes: --memory-mb); the writer takes them in listing
//      order, gives each valid item the next index and writes it
//      asynchronously: data rows (one INSERT; one unlogged single-partition
//      batch below 8 MiB; else chunk by chunk, the static columns last), then
//      its metadata row (rows of one metadata partition travel together, up
//      to meta_batch per unlogged single-partition batch); at most
//      `concurrency` samples in flight;
//   3. the segment's committed count advances as a contiguous watermark
//      (with bytes, size_hist, max_size, next_pos) every commit_interval and
//      at the end; the segment is sealed when every position was handled.
//
// Every write is idempotent (same key, same values), so a run that crashed
// or was interrupted is finished by running the same command again: indices
// are assigned deterministically, rows above the committed count are simply
// rewritten. Segment rows are written with client timestamps that increase
// strictly (and start above the row's current write time), so an older
// watermark can never overwrite a newer one.
//
// --strict: every remaining item is read and validated before anything is
// written; any skip fails the run and nothing is written. If an item turns
// bad between validation and writing, the run fails and the committed count
// stops before it (the watermark never includes a skipped position).
//
// The parts: the per-split decision is store/split_plan.h (pure), the
// feeder of one segment store/ingest_segment.h, the writer of a segment's
// samples store/segment_writer.h, the segments-table
// bookkeeping (read, claim, supersede, commit) store/segments_table.h, the
// data row's statements store/sample_row.h; ingest.cc runs the phases.
//
// Thread-safety: Ingest() runs on the calling thread plus its own reader
// threads; the callbacks in IngestOptions are called from the calling thread.
#ifndef CQLSTREAM_STORE_INGEST_H_
#define CQLSTREAM_STORE_INGEST_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cql/request.h"
#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "net/session.h"
#include "store/schema.h"
#include "store/source.h"

namespace cqlstream::store {

// A payload at or above this size is written chunk by chunk instead of in
// one single-partition batch.
inline constexpr int64_t kMaxBatchBytes = 8 << 20;

struct IngestProgress {
  std::string split;
  int64_t items_total = 0;   // positions to handle in this run (all splits)
  int64_t items_done = 0;    // written + skipped
  int64_t bytes_total = 0;   // listed bytes to handle
  int64_t bytes_done = 0;
  int64_t skipped = 0;
  double elapsed_s = 0;
};

struct IngestOptions {
  std::string keyspace = "cqlstream";
  std::string dataset;
  ListOptions source;
  int shard_index = 0;
  int shard_count = 1;
  bool strict = false;
  // A source whose items match, by relative path and size, samples that
  // another source already committed to the same split is refused (the same
  // files ingested again from another location would be duplicated); this
  // allows it (the two sources really hold different images).
  bool allow_same_paths = false;
  std::optional<int32_t> chunk_size;  // default kDefaultChunkSize (or the dataset's)
  Replication replication;            // for a new keyspace
  bool replication_given = false;
  std::string description;            // for a new dataset
  // --kind: images are validated (CheckImage); blobs are stored as any bytes.
  SampleKind kind = SampleKind::kImage;
  // Ingest-time preprocessing of images, in its canonical text form
  // (store/preprocess.h; e.g. "resize-shorter=256,center-crop=224,
  // reencode=jpeg:90"); "" stores images as they came. Recorded in the
  // catalog: every ingest into a dataset must use the same.
  std::string preprocess;
  int concurrency = 64;               // samples in flight
  int64_t memory_bytes = 512ll << 20; // payload bytes read ahead + in flight
  int readers = 4;                    // reader threads
  cql::Consistency consistency = cql::Consistency::kLocalQuorum;
  std::chrono::milliseconds commit_interval{2000};
  int64_t commit_every = 0;           // also commit after this many samples (0: by time only)
  int write_attempts = 3;             // per statement, on top of the session's retries
  int64_t max_batch_bytes = kMaxBatchBytes;  // payloads of this size or more: chunk by chunk
  int meta_batch = 32;                // metadata rows of one block per unlogged batch
  // Set (e.g. by a SIGINT handler) to stop: in-flight writes finish, the
  // watermark is committed, the segment stays open; Ingest returns Cancelled.
  const std::atomic<bool>* stop = nullptr;
  // Called from the calling thread about every 200 ms and at the end.
  std::function<void(const IngestProgress&)> on_progress;
  // Called once the plan is known, before anything is written (for messages).
  std::function<void(const std::string&)> on_note;

  // Testing: simulate a crash once this many samples were issued in this
  // run: nothing more is issued, in-flight writes finish (so rows above the
  // committed count exist), the final watermark is NOT committed (only
  // periodic commits happened) and Ingest returns Cancelled. Negative: off.
  int64_t crash_after = -1;
};

struct IngestSkip {
  std::string split;
  std::string path;
  std::string reason;
};

struct SplitResult {
  std::string split;
  int32_t seg = -1;
  std::string action;        // "new", "resumed", "appended", "complete", "nothing new", "not started"
  int64_t listed = 0;        // items of the shard's listing (after append filtering)
  int64_t start_count = 0;   // committed count when the run started
  int64_t count = 0;         // committed count at the end
  int64_t written = 0;       // samples written by this run
  int64_t bytes = 0;         // payload bytes written by this run
  int64_t skipped = 0;       // skips found by this run
  bool sealed = false;
};

struct IngestReport {
  std::string dataset;
  bool created_dataset = false;
  LabelKind label_kind = LabelKind::kNone;
  std::vector<std::string> class_names;
  int32_t chunk_size = kDefaultChunkSize;
  std::vector<SplitResult> splits;
  std::vector<IngestSkip> skips;  // in listing order
  std::vector<std::string> notes;
  int64_t written = 0;
  int64_t bytes = 0;
  double seconds = 0;

  // The skips grouped by reason (most frequent first): each reason with its
  // total and the first `per_reason` "split: path" lines.
  std::string FormatSkips(size_t per_reason = 20) const;
};

// Runs an ingest. *report is filled as far as the run got, also on errors.
// With glibc, the first call sets the process's malloc mmap threshold to
// 32 MiB and its trim threshold to 256 MiB (mallopt), so that the samples'
// buffers are reused instead of faulted in anew (ingest.cc says why).
Status Ingest(net::Session& s, const IngestOptions& options, IngestReport* report);

// Bucket of a payload size in segments.size_hist: floor(log2(size)), sizes
// in [2^b, 2^(b+1)); 0 for size 0.
int SizeBucket(int64_t size);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_INGEST_H_
