// Copyright (c) cqlstream authors.
//
// A batch of .npy samples (datasets of sample kind "blob" read with
// decode='npy') decoded into one buffer: every sample's array, and for
// label kind "target" every sample's target (as raw bytes or as a second
// .npy array), each described by an NpyItem (dtype, shape, order, where its
// items lie in the buffer).
//
// Layout of the buffer (what DecodeNpyBatch writes):
//   - the arrays of the kept samples, in sample order. When they all share
//     dtype, shape and memory order (`stacked`), they lie back to back from
//     offset 0, so the first n x bytes of the buffer are one (n, *shape)
//     array; otherwise each starts at a multiple of kNpyAlign.
//   - then the targets, each at a multiple of kNpyAlign (raw targets are
//     1-D uint8 items).
// Items are in native byte order (ParseNpy swaps big-endian files) and, as
// the buffer is kNpyAlign-aligned, aligned for their dtype.
//
// Errors: a sample whose bytes (or target, with NpyTargets::kNpy) are not a
// valid .npy file gets a Status naming its key ("sample 0:17: not a valid
// .npy array: ..."). With skip_bad the sample is left out of the layout
// (kept lists those that stay); otherwise the first bad sample's Status is
// returned and nothing is allocated. The buffer is sized by the input: the
// arrays' items are exactly the bytes that follow each header, so the total
// is at most the batch's bytes plus kNpyAlign per item.
//
// Thread-safety: DecodeNpyBatch is reentrant (the pool may be shared).
// Ownership: the caller owns the batch and the buffer `alloc` returns;
// nothing is retained after the call.
#ifndef CQLSTREAM_LOADER_NPY_BATCH_H_
#define CQLSTREAM_LOADER_NPY_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "cqlstream/loader.h"
#include "cqlstream/status.h"
#include "loader/decode.h"
#include "loader/npy.h"

namespace cqlstream::loader {

inline constexpr size_t kNpyAlign = 64;

// What happens to the target bytes of a label-kind "target" dataset.
enum class NpyTargets {
  kNone,   // dropped
  kBytes,  // kept as they are (1-D uint8 items)
  kNpy,    // decoded as .npy arrays too (e.g. segmentation masks)
};

// One array in a decoded batch's buffer.
struct NpyItem {
  NpyDtype dtype = NpyDtype::kUInt8;
  std::vector<uint64_t> shape;  // empty: a 0-d array
  bool fortran_order = false;   // the items are column-major
  size_t offset = 0;            // into the buffer
  size_t bytes = 0;             // product(shape) x itemsize

  bool SameKind(const NpyItem& o) const {
    return dtype == o.dtype && shape == o.shape && fortran_order == o.fortran_order;
  }
};

struct NpyBatchLayout {
  std::vector<size_t> kept;      // indices into the batch of the samples decoded
  std::vector<NpyItem> arrays;   // one per kept sample
  std::vector<NpyItem> targets;  // one per kept sample (NpyTargets::kNone: empty)
  bool stacked = false;          // see the top of this file
  size_t total_bytes = 0;
};

// Decodes every sample of `batch` (see the top of this file) into a buffer
// of layout->total_bytes that alloc(total_bytes) returns (nullptr: out of
// memory, an Overloaded error). *skipped counts samples left out.
// REQUIRES: alloc returns kNpyAlign-aligned memory; targets other than
// kNone only for batches whose sizes exceed image_sizes by the target.
Status DecodeNpyBatch(DecodePool& pool, const Batch& batch, NpyTargets targets, bool skip_bad,
                      const std::function<uint8_t*(size_t)>& alloc, NpyBatchLayout* layout, uint8_t** buffer,
                      int64_t* skipped);

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_NPY_BATCH_H_
