// Copyright (c) cqlstream authors.
//
// The key snapshot of an attached split (store/attached.h): a parallel,
// paged token-range scan of the foreign table
//
//   SELECT token("<key>"), "<key>"[, "<label>"] FROM "ks"."table"
//     WHERE token("<key>") > ? AND token("<key>") <= ?
//
// (the label only for a text label, whose distinct values become the class
// names; the token so that each page is checked to be this range's, in ring
// order, store/key_scan_order.h, and the answer's columns are checked too),
// writing one k_<dataset> row (seg, idx, key) per key in unlogged
// batches. Keys get dense indices in the order pages arrive: sample g of the
// scan is (segs[g / capacity], g % capacity), so a split is one segment up to
// `segment_capacity` keys (2^30 by default) and a few beyond.
//
// The ring is split into `ranges` pieces of the Murmur3 ring (default 4 x
// hosts x concurrency); the first piece starts above -2^63, which no key has
// (Cassandra maps that token to 2^63 - 1), and the last ends at 2^63 - 1, so
// the pieces cover every key once.
//
// Memory is bounded regardless of the key count: a worker holds one page
// (`page_size` keys) and waits for the page's batches before it asks for the
// next page, so at most concurrency x page_size keys are held or in flight.
// Only the distinct label texts are kept (at most kMaxClasses, kMaxClassListBytes
// in all; more is InvalidArgument).
//
// Segments are claimed (state 'open', count 0) as the scan reaches them and
// left open with count 0: they hold no committed sample until the caller
// commits them (store/attach.h), so a scan that fails or is interrupted
// leaves nothing readable.
//
// Thread-safety: WriteKeySnapshot runs its workers itself; on_progress is
// called from one worker at a time (serialized).
#ifndef CQLSTREAM_STORE_KEY_SNAPSHOT_H_
#define CQLSTREAM_STORE_KEY_SNAPSHOT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cqlstream/status.h"
#include "net/session.h"
#include "store/attached.h"

namespace cqlstream::store {

struct KeySnapshotOptions {
  int concurrency = 8;                     // token ranges scanned at once
  int ranges = 0;                          // 0: 4 x hosts x concurrency
  int32_t page_size = 2000;                // keys per page
  int batch_rows = 32;                     // k_ rows per unlogged batch
  size_t batch_bytes = 4096;               // key bytes per batch (Cassandra warns at 5 KiB)
  int64_t segment_capacity = int64_t{1} << 30;  // keys per segment
  const std::atomic<bool>* stop = nullptr;       // set: Cancelled
  std::function<void(int64_t keys)> on_progress;  // keys written so far
};

struct KeySnapshotSegment {
  int32_t seg = 0;
  int64_t count = 0;
};

struct KeySnapshot {
  std::vector<KeySnapshotSegment> segments;  // ascending seg; count > 0
  std::vector<int32_t> empty_claims;         // segments claimed but left without keys (none normally)
  int64_t keys = 0;
  std::vector<std::string> label_texts;      // sorted, distinct (text labels only)
  double seconds = 0;
};

// Scans `split`'s table of `a` into keyspace.k_<dataset> (which must exist).
// Errors name the table; a null label is not an error (the loader reports the
// sample when it reads it).
StatusOr<KeySnapshot> WriteKeySnapshot(net::Session& s, const std::string& keyspace, const std::string& dataset,
                                       const AttachedTable& a, const std::string& split, const KeySnapshotOptions& o);

// The scan's statement text for `split` (exposed for tests and docs).
std::string KeyScanCql(const AttachedTable& a, const std::string& split);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_KEY_SNAPSHOT_H_
