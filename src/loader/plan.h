// Copyright (c) cqlstream authors.
//
// The epoch plan: which samples a rank reads in an epoch, and in what order.
//
//  * Permutation: a keyed pseudo-random permutation of [0, n) computed on
//    demand (util/permutation.h: a 4-round Feistel network with cycle
//    walking); nothing is materialized, so a plan over 10^9 samples takes a
//    few bytes. (With LoaderOptions::packed, loader/packed_order.h.)
//  * The permutation of epoch e is keyed by (seed, e) only: every rank
//    computes the same global order whatever its own randomness.
//  * Ranks take contiguous, disjoint slices of the global order: rank r of W
//    gets positions [floor(r*n/W), floor((r+1)*n/W)) (sizes differing by at
//    most one), so their union is the whole split. This is DALI's shard cut
//    (its iterators' _calculate_shard_sizes), the one shard formula of the
//    project: the DALI reader's shard i is loader rank i. After a resume
//    with another world size, a rank's part is a list of position ranges
//    instead of one (see checkpoint.h).
//  * SampleSource maps a sample ordinal (in [0, n)) to its key: by binary
//    search over segment prefix sums (a split) or by index into the
//    selection's key list (in the selection's order; a key may appear more
//    than once).
//
// Thread-safety: all types are immutable after construction and safe to share.
#ifndef CQLSTREAM_LOADER_PLAN_H_
#define CQLSTREAM_LOADER_PLAN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "util/permutation.h"

namespace cqlstream::loader {

// The epoch's permutation: KeyedPermutation(n, seed, epoch, shuffle).
using Permutation = KeyedPermutation;

// A half-open range of global plan positions.
struct PositionRange {
  uint64_t begin = 0, end = 0;
  uint64_t size() const { return end - begin; }
  bool operator==(const PositionRange&) const = default;
};

// floor(i * n / s), computed without overflow. REQUIRES: 1 <= s, 0 <= i <= s.
uint64_t ShardBegin(uint64_t n, int i, int s);
// The contiguous slice of [0, n) that rank `rank` of `world` gets:
// [ShardBegin(n, rank, world), ShardBegin(n, rank + 1, world)).
// REQUIRES: 0 <= rank < world.
PositionRange RankSlice(uint64_t n, int rank, int world);

// Splits the positions in `ranges` (ascending, disjoint) into `world`
// consecutive parts whose sizes differ by at most one, and returns part
// `rank` (as ranges). Used to re-split the rest of an epoch on resume.
std::vector<PositionRange> SplitRanges(const std::vector<PositionRange>& ranges, int rank, int world);

// Maps sample ordinals [0, n) to keys.
class SampleSource {
 public:
  // All committed samples of a split, in ascending key order.
  static SampleSource FromSegments(const std::vector<SegmentInfo>& segments);
  static SampleSource FromKeys(std::vector<SampleKey> keys);
  uint64_t size() const { return n_; }
  SampleKey KeyAt(uint64_t ordinal) const;
  // A hash of the key space (segments and counts, or the key list) so that a
  // checkpoint is never applied to a different sample set.
  uint64_t Fingerprint() const { return fingerprint_; }

 private:
  uint64_t n_ = 0;
  std::vector<int32_t> segs_;
  std::vector<uint64_t> starts_;  // prefix sums: segment i covers [starts_[i], starts_[i+1])
  std::vector<SampleKey> keys_;   // selection mode
  uint64_t fingerprint_ = 0;
};

// A rank's sequence of positions in one epoch: the concatenation of its ranges.
class RankPlan {
 public:
  RankPlan() = default;
  RankPlan(std::vector<PositionRange> ranges);
  uint64_t size() const { return total_; }
  // The i-th position of this rank's sequence. REQUIRES: i < size()
  uint64_t PositionAt(uint64_t i) const;
  const std::vector<PositionRange>& ranges() const { return ranges_; }

 private:
  std::vector<PositionRange> ranges_;
  std::vector<uint64_t> starts_;
  uint64_t total_ = 0;
};

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_PLAN_H_
