// Copyright (c) cqlstream authors.
#include "loader/plan.h"

#include <xxhash.h>

#include <algorithm>
#include <cassert>

#include "util/mix.h"

namespace cqlstream::loader {
Permutation::Permutation(uint64_t n, uint64_t seed, uint64_t epoch, bool shuffle) : n_(n), shuffle_(shuffle) {
  if (!shuffle_ || n_ < 2) return;
  int bits = 2;
  while (bits < 64 && (uint64_t{1} << bits) < n_) bits += 2;  // even: balanced halves
  half_bits_ = bits / 2;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
  uint64_t k = SplitMix64(seed ^ SplitMix64(epoch + 0x632be59bd9b4e019ULL));
  for (auto& key : keys_) {
    k = SplitMix64(k);
    key = k;
  }
}

uint64_t Permutation::Feistel(uint64_t x) const {
  uint64_t l = (x >> half_bits_) & half_mask_;
  uint64_t r = x & half_mask_;
  for (uint64_t key : keys_) {
    const uint64_t f = SplitMix64(r ^ key) & half_mask_;
    const uint64_t nl = r;
    r = l ^ f;
    l = nl;
  }
  return (l << half_bits_) | r;
}

uint64_t Permutation::operator()(uint64_t i) const {
  assert(i < n_);
  if (!shuffle_ || n_ < 2) return i;
  // Cycle walking: the Feistel network permutes [0, 4^h); re-apply it until
  // the value falls into [0, n). The domain is < 4n, so this takes < 4 steps
  // on average and always terminates (the walk follows a cycle through i).
  uint64_t x = i;
  do {
    x = Feistel(x);
  } while (x >= n_);
  return x;
}

uint64_t ShardBegin(uint64_t n, int i, int s) {
  assert(s >= 1 && i >= 0 && i <= s);
  const uint64_t S = static_cast<uint64_t>(s), I = static_cast<uint64_t>(i);
  // i * n / s = i * (n / s) + i * (n % s) / s; i * (n % s) < s * s < 2^62.
  return I * (n / S) + I * (n % S) / S;
}

PositionRange RankSlice(uint64_t n, int rank, int world) {
  return {ShardBegin(n, rank, world), ShardBegin(n, rank + 1, world)};
}

std::vector<PositionRange> SplitRanges(const std::vector<PositionRange>& ranges, int rank, int world) {
  uint64_t total = 0;
  for (const auto& r : ranges) total += r.size();
  const PositionRange part = RankSlice(total, rank, world);  // in "rank of remaining" coordinates
  std::vector<PositionRange> out;
  uint64_t seen = 0;
  for (const auto& r : ranges) {
    const uint64_t lo = std::max(part.begin, seen), hi = std::min(part.end, seen + r.size());
    if (lo < hi) out.push_back({r.begin + (lo - seen), r.begin + (hi - seen)});
    seen += r.size();
  }
  return out;
}

SampleSource SampleSource::FromSegments(const std::vector<SegmentInfo>& segments) {
  SampleSource s;
  XXH64_state_t* h = XXH64_createState();
  XXH64_reset(h, 0x5e9);
  s.starts_.push_back(0);
  for (const auto& g : segments) {
    if (g.count <= 0) continue;
    s.segs_.push_back(g.seg);
    s.starts_.push_back(s.starts_.back() + static_cast<uint64_t>(g.count));
    const int64_t rec[2] = {g.seg, g.count};
    XXH64_update(h, rec, sizeof rec);
  }
  s.n_ = s.starts_.back();
  s.fingerprint_ = XXH64_digest(h);
  XXH64_freeState(h);
  return s;
}

SampleSource SampleSource::FromKeys(std::vector<SampleKey> keys) {
  SampleSource s;
  s.keys_ = std::move(keys);
  s.n_ = s.keys_.size();
  s.fingerprint_ = XXH64(s.keys_.data(), s.keys_.size() * sizeof(SampleKey), 0x5e1);
  return s;
}

SampleKey SampleSource::KeyAt(uint64_t ordinal) const {
  assert(ordinal < n_);
  if (!keys_.empty()) return keys_[ordinal];
  // The last segment whose start is <= ordinal.
  auto it = std::upper_bound(starts_.begin(), starts_.end(), ordinal);
  const size_t i = static_cast<size_t>(it - starts_.begin()) - 1;
  return MakeKey(segs_[i], static_cast<int32_t>(ordinal - starts_[i]));
}

RankPlan::RankPlan(std::vector<PositionRange> ranges) : ranges_(std::move(ranges)) {
  for (const auto& r : ranges_) {
    starts_.push_back(total_);
    total_ += r.size();
  }
}

uint64_t RankPlan::PositionAt(uint64_t i) const {
  assert(i < total_);
  auto it = std::upper_bound(starts_.begin(), starts_.end(), i);
  const size_t k = static_cast<size_t>(it - starts_.begin()) - 1;
  return ranges_[k].begin + (i - starts_[k]);
}

}  // namespace cqlstream::loader
