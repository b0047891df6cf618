// Copyright (c) cqlstream authors.
//
// One segment of an ingest (step 2 and 3 of store/ingest.h): reader threads
// read and validate the plan's items ahead (store/source.h's ReadItem),
// bounded by items and by bytes (IngestOptions::memory_bytes, a ByteBudget
// shared with the writes in flight); the feeder takes them in listing order
// and hands each to the segment's SegmentWriter (store/segment_writer.h): a
// valid item is issued as the next sample, an invalid one is skipped (or,
// under --strict, fails the run before the watermark reaches it); the
// watermark is committed every commit interval (or commit_every positions)
// and at the end, where the segment is sealed when every position was
// handled.
//
// Memory: at most `concurrency` samples in flight and `memory_bytes` of
// payload read ahead or in flight (the item the feeder waits for is always
// admitted, however large, so that the run moves).
//
// Thread-safety: WriteSegment runs on the calling thread, with its own reader
// threads and the session's I/O threads (write callbacks); it returns after
// every one of them is done with its state. IngestProgressState belongs to
// the calling thread.
#ifndef CQLSTREAM_STORE_INGEST_SEGMENT_H_
#define CQLSTREAM_STORE_INGEST_SEGMENT_H_

#include <chrono>

#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "net/session.h"
#include "store/ingest.h"
#include "store/segment_writer.h"
#include "store/split_plan.h"

namespace cqlstream::store {

// Progress shared by the splits of one run (calling thread only).
struct IngestProgressState {
  IngestProgress p;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_report{};
};

// The segment writer's options of an ingest.
SegmentWriteOptions WriteOptionsOf(const IngestOptions& o);

// Writes plan.items from plan.start.next_pos into segment plan.seg (claimed
// or resumed: plan.seg >= 0). *result gets the outcome (written, bytes,
// skipped, count, sealed), report->skips the skipped items, *progress the
// counts. Cancelled when options.stop was set (the watermark is committed,
// the segment stays open) or a simulated crash (options.crash_after) ended
// the run; a failed write or commit is returned as it is.
// Items are read with `read` (the kind's checks and the preprocessing).
Status WriteSegment(net::Session& s, const IngestOptions& options, const ReadOptions& read, const DatasetInfo& d,
                    const IngestStatements& statements, const SplitPlan& plan, IngestReport* report,
                    IngestProgressState* progress, SplitResult* result);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_INGEST_SEGMENT_H_
