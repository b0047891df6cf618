// Copyright (c) cqlstream authors.
//
// The foreign keys an attached dataset's loader has already looked up in
// the key snapshot (store/attached.h), kept for the loader's life. Reading
// an attached sample takes two round trips: its key from k_<dataset> by
// (seg, idx), then its row from the foreign table by that key. A committed
// segment's snapshot rows never change (a refresh writes new segments), so
// a key once looked up stays right for every later epoch and Fetch of the
// loader, which then read each such sample in one request: half the
// requests, and one round trip less of latency per sample.
//
// What is kept: the key cell's bytes (the protocol's serialization, as the
// snapshot holds them) in an arena of 1 MiB blocks, and for each sample an
// 8-byte entry (block offset and length). A segment of at most a quarter
// of the budget in entries (count x 8 bytes) gets a dense table of count
// entries, made when its first key is added; a larger one (a split of
// millions of samples is one segment) keeps entries in a hash map, charged
// kSparseEntryBytes each, so that it fills the budget key by key instead of
// needing its whole table first. Memory is bounded: blocks, tables and
// sparse entries are charged against `budget_bytes` before they are made,
// and a key that does not fit is not added (counted in rejected()); its
// sample goes on being looked up each time. ImageNet's 1.28 million uuid
// keys take about 31 MB (a dense table); a split of 100 million keeps
// about 800,000 of them in 64 MiB.
//
// Nothing here trusts its caller's bytes more than the snapshot's: a hit
// is decoded and checked again by the reader (store::SnapshotKeyCell).
//
// Thread-safety: thread-safe (its own mutex; Find copies the bytes out).
// Ownership: owns its copies of the keys.
#ifndef CQLSTREAM_LOADER_FOREIGN_KEY_CACHE_H_
#define CQLSTREAM_LOADER_FOREIGN_KEY_CACHE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cqlstream/dataset.h"
#include "util/mutex.h"

namespace cqlstream::loader {

class ForeignKeyCache {
 public:
  // Arena blocks; a key is at most one block (the snapshot allows 64 KiB).
  static constexpr int kBlockBits = 20;
  static constexpr size_t kBlockBytes = size_t{1} << kBlockBits;
  // What one entry of a large segment's hash map is charged (the entry,
  // its node and its share of the buckets).
  static constexpr int64_t kSparseEntryBytes = 64;

  // `counts`: samples per segment (the dataset's committed segments); a key
  // of another segment, or an idx outside [0, count), is never kept.
  ForeignKeyCache(std::map<int32_t, int64_t> counts, int64_t budget_bytes);

  // Copies the key of `sample` into *out and returns true when it is kept.
  bool Find(SampleKey sample, std::string* out) const EXCLUDES(mu_);
  // Whether the key of `sample` is kept (without copying it).
  bool Has(SampleKey sample) const EXCLUDES(mu_);
  // Keeps `key` for `sample` (a second Add of the same sample is ignored).
  // Returns false when it was not kept: an unknown segment or idx, an empty
  // key or one longer than a block, or the budget.
  bool Add(SampleKey sample, std::span<const uint8_t> key) EXCLUDES(mu_);

  int64_t keys() const EXCLUDES(mu_);
  int64_t bytes() const EXCLUDES(mu_);     // blocks, tables and sparse entries, as charged against the budget
  int64_t rejected() const EXCLUDES(mu_);  // Adds refused for the budget

 private:
  // An entry: (offset << kBlockBits) | length, offset counted over the
  // blocks in order; 0 for a key not kept (a kept key has a length >= 1).
  struct Segment {
    int64_t count = 0;
    bool dense = false;
    std::vector<uint64_t> table;                  // dense: count entries, once the first key came
    std::unordered_map<int32_t, uint64_t> map;    // sparse: idx -> entry
  };
  uint64_t EntryOf(const Segment& g, int32_t idx) const REQUIRES(mu_);

  const int64_t budget_;
  mutable Mutex mu_;
  std::map<int32_t, Segment> segs_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<uint8_t[]>> blocks_ GUARDED_BY(mu_);
  size_t used_ GUARDED_BY(mu_) = 0;  // bytes used in the last block
  int64_t keys_ GUARDED_BY(mu_) = 0;
  int64_t charged_ GUARDED_BY(mu_) = 0;
  int64_t rejected_ GUARDED_BY(mu_) = 0;
};

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_FOREIGN_KEY_CACHE_H_
