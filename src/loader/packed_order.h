// Copyright (c) cqlstream authors.
//
// The packed order (LoaderOptions::packed; docs/loader.md, "Packed reads"):
// an epoch order of a split in which the members of each pack of the packed
// layout (store/pack.h) take consecutive positions, so that the samples one
// Refill issues share a pack and are read one partition per pack.
//
//   N = F * P + R    F full packs of P samples over the split's packed
//                    segments; R samples in no pack (the leftovers of packed
//                    segments, and every sample of a segment not packed, or
//                    packed with another P)
//
//   Epoch e is F blocks; block k (k < F) is P positions holding pack
//   pi_e(k), member tau_(e,pack)(m) at its m-th position, followed by the
//   floor((k+1)*R/F) - floor(k*R/F) singleton slots of gap k. Block k
//   starts at position k*P + floor(k*R/F); singleton slot j holds
//   singleton sigma_e(j). A pack's members are consecutive positions and
//   the singletons lie evenly spread between packs. Without packs (F = 0)
//   every position is a singleton slot.
//   pi, sigma and tau are keyed permutations (util/permutation.h) of the
//   loader's seed and the epoch: each epoch reads the packs in a fresh
//   order, and each pack's members in a fresh order; which samples share a
//   pack is fixed when the dataset is packed. With shuffle off all three
//   are the identity.
//
// Every position maps to one sample and every sample to one position (the
// tests check the bijection), so the plan's ranks, drop_last, checkpoints
// and exactly-once accounting apply unchanged; PackedLayout::Fingerprint()
// names the layout in checkpoints, so a checkpoint is never applied to
// another order.
//
// Thread-safety: PackedLayout and PackedOrder are immutable after
// construction and safe to share.
#ifndef CQLSTREAM_LOADER_PACKED_ORDER_H_
#define CQLSTREAM_LOADER_PACKED_ORDER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "cqlstream/dataset.h"
#include "store/pack.h"
#include "util/permutation.h"

namespace cqlstream::loader {

// A split's segments as the packed order sees them.
class PackedLayout {
 public:
  struct Segment {
    int32_t seg = 0;
    int64_t count = 0;
    // The segment's packs (store::PackMembership), when it is packed with
    // the layout's pack size.
    std::optional<store::PackMembership> packs;
  };
  // `segments`: the split's segments with samples, ascending seg (the
  // order of SampleSource::FromSegments); `pack_size`: P (>= 1).
  PackedLayout(std::vector<Segment> segments, int32_t pack_size);

  uint64_t size() const { return n_; }               // N
  uint64_t packs() const { return packs_total_; }     // F
  uint64_t singletons() const { return singles_total_; }  // R
  int32_t pack_size() const { return pack_size_; }
  // A hash of the segments, their packs and P: mixed into a checkpoint's
  // fingerprint.
  uint64_t Fingerprint() const { return fingerprint_; }

  struct Sample {
    uint64_t ordinal;  // in [0, N): the SampleSource ordinal (segment start + idx)
    int32_t seg;
    int32_t pack;      // the pack it is read from; -1: read alone
    bool last = false;  // the pack's last member in this order (the pack is all issued with it)
  };
  // The g-th pack's member m (g < packs(), m < P), and the t-th singleton.
  Sample PackMember(uint64_t g, int32_t m) const;
  Sample Singleton(uint64_t t) const;

 private:
  std::vector<Segment> segs_;
  std::vector<uint64_t> starts_;       // ordinal of each segment's idx 0
  std::vector<uint64_t> pack_starts_;  // prefix sums of the segments' packs (size + 1)
  std::vector<uint64_t> single_starts_;  // prefix sums of their singletons (size + 1)
  int32_t pack_size_;
  uint64_t n_ = 0, packs_total_ = 0, singles_total_ = 0;
  uint64_t fingerprint_ = 0;
};

// One epoch's packed order over a layout.
class PackedOrder {
 public:
  PackedOrder(std::shared_ptr<const PackedLayout> layout, uint64_t seed, uint64_t epoch, bool shuffle);
  uint64_t size() const { return layout_->size(); }
  // The sample at position i. REQUIRES: i < size()
  PackedLayout::Sample At(uint64_t i) const;

 private:
  // The first position of block k (k <= F; block F starts at N).
  uint64_t BlockStart(uint64_t k) const;

  std::shared_ptr<const PackedLayout> layout_;
  uint64_t seed_, epoch_;
  bool shuffle_;
  KeyedPermutation pi_, sigma_;
};

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_PACKED_ORDER_H_
