// Copyright (c) cqlstream authors.
#include "loader/packed_order.h"

#include <algorithm>
#include <cassert>

#include "util/mix.h"

namespace cqlstream::loader {
namespace {

// Keys that set the three permutations of an epoch apart.
constexpr uint64_t kPackKey = 0x9d2c5680a5b1e3f7ULL, kSingleKey = 0x4f1bbcdcbfa53e0bULL,
                   kMemberKey = 0x2545f4914f6cdd1dULL;

// The segment whose prefix-sum range [starts[s], starts[s+1]) holds x.
size_t SegmentOf(const std::vector<uint64_t>& starts, uint64_t x) {
  return static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), x) - starts.begin()) - 1;
}

}  // namespace

PackedLayout::PackedLayout(std::vector<Segment> segments, int32_t pack_size)
    : segs_(std::move(segments)), pack_size_(std::max(pack_size, 1)) {
  uint64_t fp = SplitMix64(0x7061636b65640000ULL ^ static_cast<uint64_t>(pack_size_));
  pack_starts_.push_back(0);
  single_starts_.push_back(0);
  for (const Segment& g : segs_) {
    starts_.push_back(n_);
    n_ += static_cast<uint64_t>(g.count);
    const uint64_t packs = g.packs ? static_cast<uint64_t>(g.packs->packs()) : 0;
    packs_total_ += packs;
    singles_total_ += static_cast<uint64_t>(g.count) - packs * static_cast<uint64_t>(pack_size_);
    pack_starts_.push_back(packs_total_);
    single_starts_.push_back(singles_total_);
    fp = SplitMix64(fp ^ static_cast<uint32_t>(g.seg));
    fp = SplitMix64(fp ^ static_cast<uint64_t>(g.count));
    fp = SplitMix64(fp ^ packs);
    if (packs > 0) fp = SplitMix64(fp ^ static_cast<uint64_t>(g.packs->seed()));
  }
  fingerprint_ = fp;
}

PackedLayout::Sample PackedLayout::PackMember(uint64_t g, int32_t m) const {
  const size_t s = SegmentOf(pack_starts_, g);
  const Segment& seg = segs_[s];
  const int64_t j = static_cast<int64_t>(g - pack_starts_[s]);
  const int32_t idx = seg.packs->Member(j, m);
  return {starts_[s] + static_cast<uint64_t>(idx), seg.seg, static_cast<int32_t>(j)};
}

PackedLayout::Sample PackedLayout::Singleton(uint64_t t) const {
  const size_t s = SegmentOf(single_starts_, t);
  const Segment& seg = segs_[s];
  const int64_t k = static_cast<int64_t>(t - single_starts_[s]);
  const int32_t idx = seg.packs ? seg.packs->Leftover(k) : static_cast<int32_t>(k);
  return {starts_[s] + static_cast<uint64_t>(idx), seg.seg, -1};
}

PackedOrder::PackedOrder(std::shared_ptr<const PackedLayout> layout, uint64_t seed, uint64_t epoch, bool shuffle)
    : layout_(std::move(layout)),
      seed_(seed),
      epoch_(epoch),
      shuffle_(shuffle),
      pi_(layout_->packs(), seed ^ kPackKey, epoch, shuffle),
      sigma_(layout_->singletons(), seed ^ kSingleKey, epoch, shuffle) {}

uint64_t PackedOrder::BlockStart(uint64_t k) const {
  const uint64_t f = layout_->packs(), r = layout_->singletons();
  const uint64_t singles_before = static_cast<uint64_t>(static_cast<unsigned __int128>(k) * r / f);
  return k * static_cast<uint64_t>(layout_->pack_size()) + singles_before;
}

PackedLayout::Sample PackedOrder::At(uint64_t i) const {
  const uint64_t f = layout_->packs(), r = layout_->singletons();
  assert(i < layout_->size());
  if (f == 0) return layout_->Singleton(sigma_(i));
  // The block holding i: the last k in [0, F) with BlockStart(k) <= i
  // (BlockStart grows with k; BlockStart(0) = 0).
  uint64_t lo = 0, hi = f;  // BlockStart(lo) <= i < BlockStart(hi)
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    (BlockStart(mid) <= i ? lo : hi) = mid;
  }
  const uint64_t offset = i - BlockStart(lo);
  const uint64_t p = static_cast<uint64_t>(layout_->pack_size());
  if (offset >= p) {
    const uint64_t singles_before = static_cast<uint64_t>(static_cast<unsigned __int128>(lo) * r / f);
    return layout_->Singleton(sigma_(singles_before + offset - p));
  }
  const uint64_t g = pi_(lo);
  const KeyedPermutation tau(p, seed_ ^ kMemberKey ^ SplitMix64(g), epoch_, shuffle_);
  PackedLayout::Sample x = layout_->PackMember(g, static_cast<int32_t>(tau(offset)));
  x.last = offset == p - 1;
  return x;
}

}  // namespace cqlstream::loader
