// Copyright (c) cqlstream authors.
//
// The batch assembler of one epoch (or of one Fetch call): which batch and
// slot a sample's bytes go to, holes left by samples that could not be read,
// the compaction of a finished batch, and the order in which finished batches
// are handed out. It does no I/O: the loader's request side reserves a slot
// when an answer's first data cell arrives, writes the bytes there, and
// reports the sample complete or failed.
//
// A sample is identified by its sequence number `seq` in [0, samples()): its
// place in the rank's plan for the epoch.
//  * Out-of-order mode (default): a batch takes samples in the order their
//    slots are reserved (the order data starts to arrive). One batch is open
//    at a time; it is sealed when its capacity is reserved. A batch is ready
//    when every slot is filled or a hole, and batches are handed out in the
//    order they became ready, except that the epoch's tail batch (opened for
//    fewer samples than a batch) waits until it is the last one.
//  * Ordered mode (ordered loaders, Fetch): sample seq goes to slot
//    seq % batch_size of batch seq / batch_size; batches are handed out in
//    index order and their bytes laid out in seq order (bit-for-bit
//    reproducible; one extra copy when the arrival order differed).
//  * Holes: a failed sample leaves its slot empty (or, without a slot,
//    shrinks the open batch or marks its ordered slot; an ordered batch is
//    opened without a buffer for that if no memory can be had). Holes are dropped
//    when the batch is finalized; a batch whose every sample failed is never
//    handed out. With `queue_errors`, each failed sample's error is queued
//    for the consumer (TakeError) in the order of failure.
//  * Memory: batch buffers come from the BufferPool; a sample that does not
//    fit in its batch's buffer gets a buffer of its own, joined into one
//    contiguous buffer when the batch is finalized. A batch's buffer is
//    charged to the pool's MemoryAccount for its resident bytes (what a
//    recycled buffer kept, or what was reserved in it, whichever is more), a
//    buffer of its own for its size; the charges are given back when a
//    handed-out batch is released (it may outlive the assembler and loader).
//  * Checkpoints: the sequence numbers handed out, failed or lost (see
//    AssemblyProgress::lost) are tracked as a watermark plus the set above it
//    (done_watermark, done_above).
//
// Ownership: the assembler owns the batches under assembly; a handed-out
// batch is owned by its shared_ptr holders. A Slot keeps its batch alive; its
// `data` stays valid until the slot is completed or failed.
// Thread-safety: none; the loader calls it under its lock. Handed-out
// batches are immutable and may be read from any thread.
#ifndef CQLSTREAM_LOADER_BATCH_ASSEMBLER_H_
#define CQLSTREAM_LOADER_BATCH_ASSEMBLER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "cqlstream/loader.h"
#include "cqlstream/status.h"
#include "loader/buffer_pool.h"

namespace cqlstream::loader {

class AssembledBatch;

// Where one sample's bytes go: a reserved slot of a batch under assembly.
struct Slot {
  std::shared_ptr<AssembledBatch> batch;  // null: no slot reserved
  int index = -1;
  uint8_t* data = nullptr;  // where the sample's `size` bytes go
  uint64_t size = 0;
  explicit operator bool() const { return batch != nullptr; }
};

// What a complete sample carries besides its bytes.
struct SampleFields {
  int64_t image_size = -1;  // -1: the whole payload is the image
  int32_t label = -1;
  std::optional<std::vector<int32_t>> labels;  // multilabel datasets only
};

// What a Complete or Fail call changed.
struct AssemblyProgress {
  bool batch_finished = false;  // a batch became ready (or was dropped: all holes)
  // Filled samples lost because their batch's buffers could not be joined
  // (no memory); each is queued as an error with `queue_errors`, and done
  // (as a failed sample is).
  int64_t lost = 0;
};

// A batch with no samples (e.g. a Fetch whose every key was skipped).
std::shared_ptr<Batch> EmptyBatch(int64_t epoch);

class BatchAssembler {
 public:
  struct Options {
    int batch_size = 1;      // REQUIRES: >= 1
    bool ordered = false;
    bool queue_errors = true;  // OnMissing::kRaise: failed samples are queued for TakeError
    int64_t epoch = 0;         // Batch::epoch of the batches
    int64_t base_batches = 0;  // Batch::index of the first batch handed out (a resumed epoch)
  };
  // `samples`: how many sequence numbers the epoch has.
  BatchAssembler(Options o, uint64_t samples, std::shared_ptr<BufferPool> pool);

  uint64_t samples() const { return samples_; }
  // Samples neither given a slot nor resolved.
  uint64_t unslotted() const { return unslotted_; }
  // Free slots of batches already open: besides new batches, the only place
  // samples without a slot may land (the open batch out-of-order; every
  // batch under assembly in ordered mode).
  uint64_t OpenSlots() const;
  // Batches under assembly that may still take samples (at most).
  uint64_t OpenBatches() const { return o_.ordered ? building_.size() : (open_ ? 1 : 0); }
  // Batches under assembly without a buffer yet (ordered mode: opened for
  // holes while no memory could be had); each takes one when a sample lands.
  uint64_t BufferlessBatches() const;

  // Reserves sample `seq`'s slot for `size` bytes. Fails only when no memory
  // can be had for a new batch or a buffer of its own.
  // REQUIRES: seq < samples(), not reserved or resolved before.
  StatusOr<Slot> Reserve(uint64_t seq, SampleKey key, uint64_t size);
  // The sample in `slot` is complete (its bytes written). Resets `slot`.
  AssemblyProgress Complete(Slot& slot, SampleFields fields);
  // Sample `seq` could not be read: a hole (`slot` may be empty: never
  // reserved). Resets `slot`. REQUIRES: not resolved before.
  AssemblyProgress Fail(uint64_t seq, SampleKey key, Slot& slot, const Status& err);

  // The next batch to hand out, or null when none is ready yet. Marks its
  // samples done and numbers it.
  std::shared_ptr<Batch> TakeReady();
  // The oldest queued error of a failed sample.
  std::optional<std::pair<SampleKey, Status>> TakeError();
  bool HasErrors() const { return !errors_.empty(); }
  // Some finished batch is waiting (perhaps not yet deliverable).
  bool HoldsFinishedBatches() const { return !ready_.empty() || !ready_by_index_.empty(); }
  // Every sample resolved and every batch finished.
  bool Settled() const { return resolved_ == samples_ && building_.empty(); }
  // Settled and every batch handed out.
  bool Finished() const { return Settled() && !HoldsFinishedBatches(); }

  // Batch::index the next batch handed out gets.
  int64_t next_batch_index() const { return o_.base_batches + delivered_; }
  // Checkpoint bookkeeping: every seq below the watermark, and those in
  // done_above(), were handed out or failed.
  uint64_t done_watermark() const { return done_wm_; }
  const std::set<uint64_t>& done_above() const { return done_above_; }

 private:
  std::shared_ptr<AssembledBatch> OrderedBatch(uint64_t seq, Status* err);
  std::shared_ptr<AssembledBatch> NewBatch(int capacity, int64_t build_index, Status* err);
  Status Place(AssembledBatch& b, int slot, uint64_t size, uint8_t** data);
  void MarkUnslottedHole(uint64_t seq, std::shared_ptr<AssembledBatch>* b);
  AssemblyProgress CheckBatch(const std::shared_ptr<AssembledBatch>& b);
  Status Finalize(AssembledBatch& b);
  std::shared_ptr<AssembledBatch> TakeOutOfOrder();
  std::shared_ptr<AssembledBatch> TakeOrdered();
  void MarkDone(uint64_t seq);

  const Options o_;
  const uint64_t samples_;
  std::shared_ptr<BufferPool> pool_;
  uint64_t unslotted_;
  uint64_t ordered_open_slots_ = 0;  // ordered: free slots of the batches in building_
  uint64_t resolved_ = 0;
  int64_t batches_opened_ = 0;  // out-of-order: build index of the next batch
  int64_t delivered_ = 0;
  std::shared_ptr<AssembledBatch> open_;  // out-of-order: the batch taking new samples
  std::map<int64_t, std::shared_ptr<AssembledBatch>> building_;
  std::deque<std::shared_ptr<AssembledBatch>> ready_;  // out-of-order: in the order finished
  std::map<int64_t, std::shared_ptr<AssembledBatch>> ready_by_index_;  // ordered; null: all holes
  int64_t next_ordered_ = 0;
  std::deque<std::pair<SampleKey, Status>> errors_;
  uint64_t done_wm_ = 0;
  std::set<uint64_t> done_above_;
};

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_BATCH_ASSEMBLER_H_
