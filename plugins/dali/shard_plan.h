// Copyright (c) cqlstream authors.
//
// Shard and epoch arithmetic of the DALI reader: how many samples and
// batches DALI's framework iterators (nvidia.dali.plugin.base_iterator)
// expect from each shard, and which cqlstream loader rank reads a DALI shard
// so that the two agree. Pure functions without DALI or a database.
//
// DALI cuts n samples into S shards at floor(i * n / S) (the iterator's
// _calculate_shard_sizes); cqlstream's loader gives the n % S larger slices
// to the first ranks (loader::RankSlice). Both produce n % S slices of
// floor(n / S) + 1 samples and the rest of floor(n / S), only at different
// positions, so DALI shard i is read by the loader rank whose slice has the
// size DALI expects for i (LoaderRankForShard). That mapping is a
// permutation: the shards stay disjoint and cover the split.
//
// Thread-safety: pure functions.
#ifndef CQLSTREAM_PLUGINS_DALI_SHARD_PLAN_H_
#define CQLSTREAM_PLUGINS_DALI_SHARD_PLAN_H_

#include <cstdint>

namespace cqlstream::dali_plugin {

// floor(i * n / s) without 128-bit arithmetic.
// REQUIRES: 0 <= i <= s, s >= 1.
uint64_t DaliShardBegin(uint64_t n, int i, int s);
// Samples DALI's iterators expect in shard i: DaliShardBegin(i + 1) - DaliShardBegin(i).
uint64_t DaliShardSize(uint64_t n, int i, int s);
// Samples per shard and epoch including the padding of a reader with
// pad_last_batch: ceil(n / s), the same for every shard (DALI's Loader::Size).
uint64_t PaddedShardSize(uint64_t n, int s);
// DALI iterations per epoch, the same for every shard: ceil(ceil(n / s) / batch).
uint64_t BatchesPerEpoch(uint64_t n, int s, int batch_size);
// The loader rank (of world size s) whose slice has DaliShardSize(n, i, s) samples.
int LoaderRankForShard(uint64_t n, int i, int s);

}  // namespace cqlstream::dali_plugin

#endif  // CQLSTREAM_PLUGINS_DALI_SHARD_PLAN_H_
