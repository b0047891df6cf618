// Copyright (c) cqlstream authors.
//
// Shard and epoch arithmetic of the DALI reader: how many samples and
// batches DALI's framework iterators (nvidia.dali.plugin.base_iterator)
// expect from each shard. Pure functions without DALI or a database.
//
// DALI cuts n samples into S shards at floor(i * n / S) (the iterators'
// _calculate_shard_sizes). So does cqlstream's loader (loader::RankSlice,
// loader/plan.h: the one shard formula), so DALI shard i is loader rank i and
// has loader::RankSlice(n, i, S).size() samples.
//
// Thread-safety: pure functions.
#ifndef CQLSTREAM_PLUGINS_DALI_SHARD_PLAN_H_
#define CQLSTREAM_PLUGINS_DALI_SHARD_PLAN_H_

#include <cstdint>

namespace cqlstream::dali_plugin {

// Samples per shard and epoch including the padding of a reader with
// pad_last_batch: ceil(n / s), the same for every shard (DALI's Loader::Size).
uint64_t PaddedShardSize(uint64_t n, int s);
// DALI iterations per epoch, the same for every shard: ceil(ceil(n / s) / batch).
uint64_t BatchesPerEpoch(uint64_t n, int s, int batch_size);

}  // namespace cqlstream::dali_plugin

#endif  // CQLSTREAM_PLUGINS_DALI_SHARD_PLAN_H_
