// Copyright (c) cqlstream authors.
#include "shard_plan.h"

#include <cassert>

namespace cqlstream::dali_plugin {

uint64_t DaliShardBegin(uint64_t n, int i, int s) {
  assert(s >= 1 && i >= 0 && i <= s);
  const uint64_t S = static_cast<uint64_t>(s), I = static_cast<uint64_t>(i);
  // i * n / s = i * (n / s) + i * (n % s) / s; i * (n % s) < s * s <= 2^62.
  return I * (n / S) + I * (n % S) / S;
}

uint64_t DaliShardSize(uint64_t n, int i, int s) { return DaliShardBegin(n, i + 1, s) - DaliShardBegin(n, i, s); }

uint64_t PaddedShardSize(uint64_t n, int s) {
  const uint64_t S = static_cast<uint64_t>(s);
  return n / S + (n % S != 0 ? 1 : 0);
}

uint64_t BatchesPerEpoch(uint64_t n, int s, int batch_size) {
  const uint64_t p = PaddedShardSize(n, s), b = static_cast<uint64_t>(batch_size);
  return p / b + (p % b != 0 ? 1 : 0);
}

int LoaderRankForShard(uint64_t n, int i, int s) {
  const uint64_t S = static_cast<uint64_t>(s), I = static_cast<uint64_t>(i);
  const uint64_t base = n / S, extra = n % S;
  // Larger DALI shards before i: floor(i * n / s) - i * base.
  const uint64_t larger_before = I * extra / S;
  if (DaliShardSize(n, i, s) == base + 1) return static_cast<int>(larger_before);
  // Smaller shards come after the `extra` larger loader slices.
  return static_cast<int>(extra + (I - larger_before));
}

}  // namespace cqlstream::dali_plugin
