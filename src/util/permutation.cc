// Copyright (c) cqlstream authors.
#include "util/permutation.h"

#include <cassert>

#include "util/mix.h"

namespace cqlstream {

KeyedPermutation::KeyedPermutation(uint64_t n, uint64_t seed, uint64_t salt, bool shuffle) : n_(n), shuffle_(shuffle) {
  if (!shuffle_ || n_ < 2) return;
  int bits = 2;
  while (bits < 64 && (uint64_t{1} << bits) < n_) bits += 2;  // even: balanced halves
  half_bits_ = bits / 2;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
  uint64_t k = SplitMix64(seed ^ SplitMix64(salt + 0x632be59bd9b4e019ULL));
  for (auto& key : keys_) {
    k = SplitMix64(k);
    key = k;
  }
}

uint64_t KeyedPermutation::Feistel(uint64_t x) const {
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

uint64_t KeyedPermutation::operator()(uint64_t i) const {
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

}  // namespace cqlstream
