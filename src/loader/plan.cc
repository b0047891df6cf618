// Copyright (c) cqlstream authors.
#include "loader/plan.h"

#include <xxhash.h>

#include <algorithm>
#include <cassert>

#include "util/mix.h"

namespace cqlstream::loader {
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
