// Copyright (c) cqlstream authors.
//
// The writer of one segment (step 2 and 3 of store/ingest.h): reader threads
// read and validate the plan's items ahead of the writer, bounded by items
// and by bytes (IngestOptions::memory_bytes); the writer takes them in
// listing order, gives each valid item the next index and writes it
// asynchronously (data rows with store/sample_row.h's inserts: one INSERT,
// one unlogged single-partition batch below max_batch_bytes, else chunk by
// chunk with the static columns last; then its metadata row, batched per
// metadata partition); the segment's committed state advances as a
// contiguous watermark (store/segments_table.h) every commit interval and at
// the end, and the segment is sealed when every position was handled.
//
// Memory: at most `concurrency` samples in flight and `memory_bytes` of
// payload read ahead or in flight (one item is always admitted, however
// large, so that the run moves).
//
// Thread-safety: WriteSegment runs on the calling thread, with its own reader
// threads and the session's I/O threads (write callbacks); it returns after
// every one of them is done with its state. IngestProgressState belongs to
// the calling thread.
#ifndef CQLSTREAM_STORE_SEGMENT_WRITER_H_
#define CQLSTREAM_STORE_SEGMENT_WRITER_H_

#include <chrono>

#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "net/session.h"
#include "store/ingest.h"
#include "store/segments_table.h"
#include "store/split_plan.h"

namespace cqlstream::store {

// The prepared statements of the writers of one dataset.
struct IngestStatements {
  net::PreparedPtr full;   // a data chunk with the static columns (DataInsertQuery)
  net::PreparedPtr chunk;  // a data chunk only (DataChunkInsertQuery)
  net::PreparedPtr meta;   // a metadata row
  SegmentCommitStatements commit;
};
StatusOr<IngestStatements> PrepareIngestStatements(net::Session& s, const DatasetInfo& d);

// Progress shared by the splits of one run (calling thread only).
struct IngestProgressState {
  IngestProgress p;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_report{};
};

// Writes plan.items from plan.start.next_pos into segment plan.seg (claimed
// or resumed: plan.seg >= 0). *result gets the outcome (written, bytes,
// skipped, count, sealed), report->skips the skipped items, *progress the
// counts. Cancelled when options.stop was set (the watermark is committed,
// the segment stays open) or a simulated crash (options.crash_after) ended
// the run; a failed write or commit is returned as it is.
Status WriteSegment(net::Session& s, const IngestOptions& options, const DatasetInfo& d,
                    const IngestStatements& statements, const SplitPlan& plan, IngestReport* report,
                    IngestProgressState* progress, SplitResult* result);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_SEGMENT_WRITER_H_
