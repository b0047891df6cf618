// Copyright (c) cqlstream authors.
#include "shard_plan.h"

namespace cqlstream::dali_plugin {

uint64_t PaddedShardSize(uint64_t n, int s) {
  const uint64_t S = static_cast<uint64_t>(s);
  return n / S + (n % S != 0 ? 1 : 0);
}

uint64_t BatchesPerEpoch(uint64_t n, int s, int batch_size) {
  const uint64_t p = PaddedShardSize(n, s), b = static_cast<uint64_t>(batch_size);
  return p / b + (p % b != 0 ? 1 : 0);
}

}  // namespace cqlstream::dali_plugin
