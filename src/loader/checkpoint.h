// Copyright (c) cqlstream authors.
//
// Loader checkpoints. A checkpoint records, for one rank, where the current
// epoch stands at a batch boundary: the plan (seed, shuffle, sample set,
// epoch), the positions this rank was assigned, and the positions it has
// already delivered (or skipped). Positions are global positions of the
// epoch's permutation, so the checkpoints of all ranks can be merged and the
// rest of the epoch re-split over a different number of ranks.
//
//   checkpoint := magic:"CQLSCKP1" version:u32 fingerprint:u64 seed:u64
//                 shuffle:u8 drop_last:u8 n:u64 epoch:i64 world:i32 rank:i32
//                 batch_size:i32 batches_delivered:i64
//                 assigned:ranges done:ranges
//   ranges     := count:u64 (begin:u64 end:u64){count}   (sorted, disjoint)
//   (all integers little-endian)
//
// Thread-safety: value types and pure functions.
#ifndef CQLSTREAM_LOADER_CHECKPOINT_H_
#define CQLSTREAM_LOADER_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cqlstream/status.h"
#include "loader/plan.h"

namespace cqlstream::loader {

using Ranges = std::vector<PositionRange>;

// Sorts and merges overlapping or adjacent ranges.
Ranges Normalize(Ranges r);
// a minus b (both normalized).
Ranges Subtract(const Ranges& a, const Ranges& b);
uint64_t CountPositions(const Ranges& r);

struct Checkpoint {
  static constexpr uint32_t kVersion = 1;
  uint64_t fingerprint = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  bool drop_last = false;
  uint64_t n = 0;
  int64_t epoch = 0;
  int32_t world = 1;
  int32_t rank = 0;
  int32_t batch_size = 0;
  int64_t batches_delivered = 0;
  Ranges assigned;
  Ranges done;

  std::string Encode() const;
  static StatusOr<Checkpoint> Decode(std::string_view bytes);
};

// The positions of the epoch still to deliver for `rank` of `world`, given
// the checkpoints of the previous run: either exactly one checkpoint with the
// same world size and rank (its assigned minus done), or one checkpoint from
// every rank of the previous run (the union of their remainders, re-split).
// Errors name what is inconsistent (different epochs, missing ranks, another
// sample set or seed).
StatusOr<Ranges> RemainingFor(const std::vector<Checkpoint>& cps, int rank, int world);

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_CHECKPOINT_H_
