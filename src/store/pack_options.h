// Copyright (c) cqlstream authors.
//
// The packed layout's limits and the options and report of PackDataset
// (store/pack.h), apart from the functions so that a caller that only asks
// for packing (store::DatasetView, the Python binding) needs no net/ or
// cql/ header.
//
// Ownership: plain values; PackOptions::stop is borrowed (it must outlive
// the PackDataset call).
// Thread-safety: plain structs, no internal synchronization.
#ifndef CQLSTREAM_STORE_PACK_OPTIONS_H_
#define CQLSTREAM_STORE_PACK_OPTIONS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cqlstream::store {

// Samples per pack: the default, and the bounds (a pack read is one `IN` on
// the clustering column: ScyllaDB refuses more than 100 clustering keys in
// one by default, max_clustering_key_restrictions_per_query).
inline constexpr int32_t kDefaultPackSize = 64;
inline constexpr int32_t kMinPackSize = 2;
inline constexpr int32_t kMaxPackSize = 100;
// The largest sample that is packed, and the most bytes one pack holds by
// its segment's max_size (half of ScyllaDB's 1 MiB soft limit for an
// unpaged read, as for coalesced reads).
inline constexpr int64_t kMaxPackSampleBytes = 16 << 10;
inline constexpr int64_t kMaxPackBytes = 512 << 10;
// The most packs PackDataset builds at a time.
inline constexpr int kMaxPackConcurrency = 256;

// One segment's packs, as the packs table records them.
struct PackInfo {
  int32_t seg = 0;
  int64_t count = 0;       // the segment's committed samples when it was packed
  int32_t pack_size = 0;   // P
  int64_t seed = 0;        // the membership permutation's seed
  int64_t packed = 0;      // samples written into packs
  int64_t left_out = 0;    // samples of full packs that failed their check
  bool operator==(const PackInfo&) const = default;
};

struct PackOptions {
  std::string split;                    // empty: every split
  // Wanted P. A split has one pack size (the packed order needs one): that
  // of its segments packed earlier, else the largest at most this that
  // fits all its packable segments (PackSizeFor of their largest max_size).
  int32_t pack_size = kDefaultPackSize;
  int concurrency = 8;                  // packs built at a time, in [1, kMaxPackConcurrency]
  bool force = false;                   // re-pack segments already packed
  const std::atomic<bool>* stop = nullptr;
  // (samples done, samples to pack)
  std::function<void(int64_t, int64_t)> on_progress;
};

struct PackedSegment {
  int32_t seg = 0;
  std::string split;
  std::string outcome;  // "packed", "already packed", or why it was not packed
  PackInfo info;        // when packed (now or before)
};

struct PackReport {
  std::vector<PackedSegment> segments;  // ascending seg
  int64_t packs_written = 0;
  int64_t samples_packed = 0;
  int64_t left_out = 0;  // samples that failed their check (read alone by the loader)
  double seconds = 0;
};

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_PACK_OPTIONS_H_
