// Copyright (c) cqlstream authors.
//
// KeyedPermutation: a keyed pseudo-random permutation of [0, n) computed on
// demand (a 4-round Feistel network over the smallest even power of two
// >= n, with cycle walking). p(i) costs a few hash evaluations; nothing is
// materialized, so a permutation of 10^9 elements takes a few words. The
// keys come from (seed, salt) only, so every process computes the same one.
//
// Two layers use it: the loader's epoch plan (loader/plan.h: salt = the
// epoch) and the packed layout's pack membership (store/pack.h: salt = the
// segment), which the loader's packed order reads back.
//
// Thread-safety: immutable after construction; safe to share.
#ifndef CQLSTREAM_UTIL_PERMUTATION_H_
#define CQLSTREAM_UTIL_PERMUTATION_H_

#include <cstdint>

namespace cqlstream {

class KeyedPermutation {
 public:
  // Identity when !shuffle.
  KeyedPermutation(uint64_t n, uint64_t seed, uint64_t salt, bool shuffle);
  uint64_t size() const { return n_; }
  // REQUIRES: i < size()
  uint64_t operator()(uint64_t i) const;

 private:
  uint64_t Feistel(uint64_t x) const;
  uint64_t n_;
  bool shuffle_;
  int half_bits_ = 1;
  uint64_t half_mask_ = 1;
  uint64_t keys_[4] = {};
};

}  // namespace cqlstream

#endif  // CQLSTREAM_UTIL_PERMUTATION_H_
