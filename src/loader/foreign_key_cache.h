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
// snapshot holds them) in one arena, and per segment a table of count
// 8-byte entries (offset and length in the arena), made when the segment's
// first key is added. Memory is bounded: a key that would take the cache
// past `budget_bytes` (both parts counted) is not added, and its sample goes
// on being looked up each time (counted in rejected()). ImageNet's 1.28
// million uuid keys take about 31 MB.
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
#include <span>
#include <string>
#include <vector>

#include "cqlstream/dataset.h"
#include "util/mutex.h"

namespace cqlstream::loader {

class ForeignKeyCache {
 public:
  // `counts`: samples per segment (the dataset's committed segments); a key
  // of another segment, or an idx outside [0, count), is never kept.
  ForeignKeyCache(std::map<int32_t, int64_t> counts, int64_t budget_bytes);

  // Copies the key of `sample` into *out and returns true when it is kept.
  bool Find(SampleKey sample, std::string* out) const EXCLUDES(mu_);
  // Whether the key of `sample` is kept (without copying it).
  bool Has(SampleKey sample) const EXCLUDES(mu_);
  // Keeps `key` for `sample` (a second Add of the same sample is ignored).
  // Returns false when it was not kept: an unknown segment or idx, an empty
  // key, or the budget.
  bool Add(SampleKey sample, std::span<const uint8_t> key) EXCLUDES(mu_);

  int64_t keys() const EXCLUDES(mu_);
  int64_t bytes() const EXCLUDES(mu_);     // arena and tables, as charged against the budget
  int64_t rejected() const EXCLUDES(mu_);  // Adds refused for the budget

 private:
  // An entry: (offset << kLengthBits) | length; 0 for a key not kept (a
  // kept key has a length of at least 1).
  static constexpr int kLengthBits = 20;  // keys of up to 1 MiB - 1 (the snapshot allows 64 KiB)

  const std::map<int32_t, int64_t> counts_;
  const int64_t budget_;
  mutable Mutex mu_;
  std::map<int32_t, std::vector<uint64_t>> tables_ GUARDED_BY(mu_);
  std::vector<uint8_t> arena_ GUARDED_BY(mu_);
  int64_t keys_ GUARDED_BY(mu_) = 0;
  int64_t charged_ GUARDED_BY(mu_) = 0;
  int64_t rejected_ GUARDED_BY(mu_) = 0;
};

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_FOREIGN_KEY_CACHE_H_
