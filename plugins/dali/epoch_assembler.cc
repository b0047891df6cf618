// Copyright (c) cqlstream authors.
#include "epoch_assembler.h"

#include <fmt/format.h>

#include <utility>

namespace cqlstream::dali_plugin {

EpochAssembler::EpochAssembler(int batch_size, uint64_t batches_per_epoch, uint64_t shard_samples, NextFn next,
                               FetchFn fetch)
    : B_(batch_size),
      slots_per_epoch_(batches_per_epoch * static_cast<uint64_t>(batch_size)),
      shard_samples_(shard_samples),
      next_(std::move(next)),
      fetch_(std::move(fetch)) {}

Status EpochAssembler::PullLoaderBatch() {
  CQLS_ASSIGN_OR_RETURN(BatchPtr b, next_());
  if (!b) {
    loader_ended_ = true;
    return Status::OK();
  }
  for (size_t i = 0; i < b->size(); ++i) pending_.push_back(SampleRef{b, i, false});
  return Status::OK();
}

Status EpochAssembler::NextBatch(std::vector<SampleRef>* out) {
  out->clear();
  out->reserve(static_cast<size_t>(B_));
  if (slot_ == slots_per_epoch_) {
    // The previous DALI epoch is complete. When its real samples filled it
    // exactly, the loader still owes the end-of-epoch marker.
    if (!loader_ended_ && pending_.empty()) CQLS_RETURN_IF_ERROR(PullLoaderBatch());
    if (!loader_ended_ || !pending_.empty()) {
      return Status::Internal(fmt::format(
          "the loader delivered more than the {} samples of this shard in epoch {} (a sharding mismatch)",
          shard_samples_, epoch_));
    }
    ++epoch_;
    slot_ = 0;
    real_ = 0;
    loader_ended_ = false;
    last_.reset();
    last_key_.reset();
  }
  while (out->size() < static_cast<size_t>(B_)) {
    if (pending_.empty() && !loader_ended_) {
      CQLS_RETURN_IF_ERROR(PullLoaderBatch());
      continue;
    }
    if (!pending_.empty()) {
      if (real_ == shard_samples_) {
        return Status::Internal(fmt::format(
            "the loader delivered more than the {} samples of this shard in epoch {} (a sharding mismatch)",
            shard_samples_, epoch_));
      }
      SampleRef r = std::move(pending_.front());
      pending_.pop_front();
      last_ = r;
      last_key_ = r.batch->keys[r.index];
      ++real_;
      out->push_back(std::move(r));
    } else {
      // The loader's epoch is over: pad with the shard's last real sample.
      if (!last_) {
        if (!last_key_) {
          return Status::NotFound(fmt::format(
              "epoch {}: no sample of this shard could be read (all skipped), so there is none to pad the "
              "epoch with",
              epoch_));
        }
        CQLS_ASSIGN_OR_RETURN(BatchPtr b, fetch_({*last_key_}));
        if (!b || b->size() != 1) {
          return Status::NotFound(
              fmt::format("sample {} (the padding of epoch {}) could not be read again", FormatKey(*last_key_), epoch_));
        }
        last_ = SampleRef{b, 0, false};
      }
      SampleRef r = *last_;
      r.padding = true;
      out->push_back(std::move(r));
    }
    ++slot_;
  }
  return Status::OK();
}

void EpochAssembler::SaveTo(ReaderCheckpoint* c) const {
  c->slot = slot_;
  c->real = real_;
  c->loader_ended = loader_ended_;
  c->has_last = last_key_.has_value();
  c->last_key = last_key_.value_or(0);
  c->pending.clear();
  for (const auto& r : pending_) c->pending.push_back(r.batch->keys[r.index]);
}

Status EpochAssembler::RestoreFrom(const ReaderCheckpoint& c) {
  if (c.slot > slots_per_epoch_ || c.real > shard_samples_ || c.real > c.slot) {
    return Status::InvalidArgument(
        fmt::format("checkpoint: position {} ({} real) does not fit an epoch of {} samples ({} real)", c.slot, c.real,
                    slots_per_epoch_, shard_samples_));
  }
  slot_ = c.slot;
  real_ = c.real;
  loader_ended_ = c.loader_ended;
  last_.reset();
  last_key_.reset();
  if (c.has_last) last_key_ = c.last_key;
  pending_.clear();
  if (!c.pending.empty()) {
    CQLS_ASSIGN_OR_RETURN(BatchPtr b, fetch_(c.pending));
    if (b) {
      for (size_t i = 0; i < b->size(); ++i) pending_.push_back(SampleRef{b, i, false});
    }
  }
  return Status::OK();
}

}  // namespace cqlstream::dali_plugin
