// Copyright (c) cqlstream authors.
//
// EpochAssembler: turns the loader's batches of one shard into the fixed-size
// batches a DALI reader must produce, with DALI's pad_last_batch semantics:
// every shard yields BatchesPerEpoch(n, S, B) batches of exactly B samples
// per epoch; after the shard's last real sample, the rest of the epoch
// repeats that sample (padding, which the framework iterators trim with
// last_batch_policy PARTIAL). Samples never cross an epoch boundary. A
// loader batch may be split across DALI batches (e.g. a short batch after a
// skipped sample); the samples in between are "pending".
//
// It holds no database code: `next` is Loader::Next (nullptr at the end of an
// epoch, the next call starts the next epoch) and `fetch` is Loader::Fetch
// (to re-read pending samples and the padding sample after a restore).
//
// Thread-safety: one thread at a time (DALI runs a reader's iterations in
// order). Ownership: emitted SampleRefs keep their loader batch alive.
#ifndef CQLSTREAM_PLUGINS_DALI_EPOCH_ASSEMBLER_H_
#define CQLSTREAM_PLUGINS_DALI_EPOCH_ASSEMBLER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "cqlstream/loader.h"
#include "reader_checkpoint.h"

namespace cqlstream::dali_plugin {

// One sample of a DALI batch: sample `index` of `batch`.
struct SampleRef {
  BatchPtr batch;
  size_t index = 0;
  bool padding = false;  // a repeat of the shard's last real sample
};

class EpochAssembler {
 public:
  using NextFn = std::function<StatusOr<BatchPtr>()>;
  using FetchFn = std::function<StatusOr<BatchPtr>(const std::vector<SampleKey>&)>;

  // batch_size: B; batches_per_epoch: BatchesPerEpoch(n, S, B);
  // shard_samples: the real samples of this shard per epoch (an upper bound:
  // skipped samples make it fewer).
  EpochAssembler(int batch_size, uint64_t batches_per_epoch, uint64_t shard_samples, NextFn next, FetchFn fetch);

  // Fills `out` with exactly B samples: the next DALI batch. An error from
  // the loader (e.g. an unreadable sample, with its key and path) is
  // returned as is; the assembler stays usable only for State().
  Status NextBatch(std::vector<SampleRef>* out);

  // DALI epoch of the last batch NextBatch produced (0-based) and its index
  // within that epoch.
  int64_t epoch() const { return epoch_; }
  uint64_t batch_in_epoch() const { return slot_ == 0 ? 0 : (slot_ - 1) / static_cast<uint64_t>(B_); }

  // The reader's part of a checkpoint (the caller adds identity and loader state).
  void SaveTo(ReaderCheckpoint* c) const;
  // Restores the position saved by SaveTo; re-reads pending samples with `fetch`.
  // REQUIRES: before the first NextBatch.
  Status RestoreFrom(const ReaderCheckpoint& c);

 private:
  Status PullLoaderBatch();

  const int B_;
  const uint64_t slots_per_epoch_;
  const uint64_t shard_samples_;
  NextFn next_;
  FetchFn fetch_;

  int64_t epoch_ = 0;
  uint64_t slot_ = 0;  // samples emitted in the current DALI epoch
  uint64_t real_ = 0;  // of which real
  bool loader_ended_ = false;
  std::deque<SampleRef> pending_;
  std::optional<SampleRef> last_;
  std::optional<SampleKey> last_key_;
};

}  // namespace cqlstream::dali_plugin

#endif  // CQLSTREAM_PLUGINS_DALI_EPOCH_ASSEMBLER_H_
