// Copyright (c) cqlstream authors.
#include "loader/batch_assembler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string>

namespace cqlstream::loader {
namespace {

SampleKey KeyOf(uint64_t seq) { return MakeKey(3, static_cast<int32_t>(seq)); }

class AssemblerTest : public ::testing::Test {
 protected:
  // Sample `seq`'s bytes: its size is unit_ + seq % 7, every byte seq & 0xff.
  uint64_t SizeOf(uint64_t seq) const { return unit_ + seq % 7; }

  // A pool whose buffers hold `capacity` bytes.
  void MakePool(size_t capacity) { pool_ = std::make_shared<BufferPool>(capacity, 4, account_); }

  BatchAssembler Make(int batch, bool ordered, uint64_t samples, int64_t base = 0) {
    if (!pool_) MakePool(1 << 20);
    BatchAssembler::Options o;
    o.batch_size = batch;
    o.ordered = ordered;
    o.epoch = 7;
    o.base_batches = base;
    return BatchAssembler(o, samples, pool_);
  }

  Slot Reserve(BatchAssembler& a, uint64_t seq) {
    auto s = a.Reserve(seq, KeyOf(seq), SizeOf(seq));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    std::fill_n(s->data, s->size, static_cast<uint8_t>(seq & 0xff));
    return std::move(*s);
  }
  AssemblyProgress Complete(BatchAssembler& a, Slot& s, uint64_t seq) {
    SampleFields f;
    f.label = static_cast<int32_t>(seq);
    f.image_size = seq % 2 == 0 ? -1 : static_cast<int64_t>(SizeOf(seq) - 1);
    return a.Complete(s, f);
  }

  // Every sample of `b` carries its own bytes, label and sizes.
  std::vector<uint64_t> CheckBatch(const Batch& b) {
    std::vector<uint64_t> seqs;
    uint64_t end = 0;
    for (size_t i = 0; i < b.size(); ++i) {
      const uint64_t seq = static_cast<uint64_t>(KeyIndex(b.keys[i]));
      seqs.push_back(seq);
      EXPECT_EQ(b.sizes[i], SizeOf(seq));
      EXPECT_EQ(b.labels[i], static_cast<int32_t>(seq));
      EXPECT_EQ(b.image_sizes[i], seq % 2 == 0 ? SizeOf(seq) : SizeOf(seq) - 1);
      auto bytes = b.sample(i);
      EXPECT_TRUE(std::all_of(bytes.begin(), bytes.end(), [&](uint8_t x) { return x == (seq & 0xff); }))
          << "sample " << seq;
      end = std::max(end, b.offsets[i] + b.sizes[i]);
    }
    // Compact: the samples' bytes and nothing else.
    uint64_t total = 0;
    for (uint64_t s : b.sizes) total += s;
    EXPECT_EQ(end, total);
    EXPECT_EQ(b.data().size(), total);
    return seqs;
  }

  uint64_t unit_ = 10;
  std::shared_ptr<MemoryAccount> account_ = std::make_shared<MemoryAccount>();
  std::shared_ptr<BufferPool> pool_;
};

TEST_F(AssemblerTest, OutOfOrderFillsBatchesInArrivalOrder) {
  BatchAssembler a = Make(4, false, 8);
  // Data of samples 5, 2, 7, 0 arrives first: they make batch 0.
  std::map<uint64_t, Slot> slots;
  for (uint64_t s : {5, 2, 7, 0, 1, 3, 4, 6}) slots[s] = Reserve(a, s);
  EXPECT_EQ(a.unslotted(), 0u);
  // Batch 1's samples complete first: it is handed out first.
  for (uint64_t s : {1, 3, 4, 6}) Complete(a, slots[s], s);
  for (uint64_t s : {5, 2, 7}) Complete(a, slots[s], s);
  auto first = a.TakeReady();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->epoch, 7);
  EXPECT_EQ(first->index, 0);
  EXPECT_EQ(CheckBatch(*first), (std::vector<uint64_t>{1, 3, 4, 6}));
  EXPECT_FALSE(a.TakeReady());  // batch 0 waits for sample 0
  EXPECT_FALSE(a.Settled());
  EXPECT_TRUE(Complete(a, slots[0], 0).batch_finished);
  auto second = a.TakeReady();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->index, 1);
  EXPECT_EQ(CheckBatch(*second), (std::vector<uint64_t>{5, 2, 7, 0}));  // the order of placement
  EXPECT_TRUE(a.Finished());
  EXPECT_EQ(a.done_watermark(), 8u);
  EXPECT_TRUE(a.done_above().empty());
}

TEST_F(AssemblerTest, TheTailBatchIsHandedOutLast) {
  BatchAssembler a = Make(4, false, 6, /*base=*/3);
  std::map<uint64_t, Slot> slots;
  for (uint64_t s : {0, 1, 2, 3}) slots[s] = Reserve(a, s);
  slots[4] = Reserve(a, 4);
  slots[5] = Reserve(a, 5);  // the tail batch: 2 samples
  for (uint64_t s : {4, 5, 0, 1, 2}) Complete(a, slots[s], s);
  EXPECT_FALSE(a.TakeReady());  // the tail is ready, the full batch is not
  Complete(a, slots[3], 3);
  auto full = a.TakeReady();
  ASSERT_TRUE(full);
  EXPECT_EQ(full->index, 3);
  EXPECT_EQ(full->size(), 4u);
  auto tail = a.TakeReady();
  ASSERT_TRUE(tail);
  EXPECT_EQ(tail->index, 4);
  EXPECT_EQ(CheckBatch(*tail), (std::vector<uint64_t>{4, 5}));
  EXPECT_EQ(a.next_batch_index(), 5);
  EXPECT_TRUE(a.Finished());
}

TEST_F(AssemblerTest, OrderedKeepsPlanOrderAndLayout) {
  BatchAssembler a = Make(3, true, 7);
  std::map<uint64_t, Slot> slots;
  // Arrival order scrambled across batches.
  for (uint64_t s : {6, 4, 0, 5, 2, 3, 1}) slots[s] = Reserve(a, s);
  for (uint64_t s : {6, 5, 4, 3}) Complete(a, slots[s], s);
  EXPECT_FALSE(a.TakeReady());  // batch 0 first, whatever is ready
  for (uint64_t s : {2, 1, 0}) Complete(a, slots[s], s);
  std::vector<std::vector<uint64_t>> got;
  while (auto b = a.TakeReady()) {
    got.push_back(CheckBatch(*b));
    // Laid out in plan order: offsets ascend.
    EXPECT_TRUE(std::is_sorted(b->offsets.begin(), b->offsets.end()));
    EXPECT_EQ(b->index, static_cast<int64_t>(got.size() - 1));
  }
  EXPECT_EQ(got, (std::vector<std::vector<uint64_t>>{{0, 1, 2}, {3, 4, 5}, {6}}));
  EXPECT_TRUE(a.Finished());
}

TEST_F(AssemblerTest, HolesAreDroppedAndErrorsQueued) {
  BatchAssembler a = Make(4, false, 8);
  std::map<uint64_t, Slot> slots;
  for (uint64_t s : {0, 1, 2, 3, 4, 5}) slots[s] = Reserve(a, s);
  // A reserved sample fails: a hole in the middle of batch 0's bytes.
  a.Fail(1, KeyOf(1), slots[1], Status::NotFound("gone"));
  for (uint64_t s : {0, 2, 3}) Complete(a, slots[s], s);
  auto b = a.TakeReady();
  ASSERT_TRUE(b);
  EXPECT_EQ(CheckBatch(*b), (std::vector<uint64_t>{0, 2, 3}));
  // Two samples fail before they have a slot: the open batch expects fewer.
  Slot none;
  a.Fail(6, KeyOf(6), none, Status::Timeout("slow"));
  EXPECT_FALSE(a.Settled());
  a.Fail(7, KeyOf(7), none, Status::Timeout("slow"));
  Complete(a, slots[4], 4);
  EXPECT_TRUE(Complete(a, slots[5], 5).batch_finished);
  b = a.TakeReady();
  ASSERT_TRUE(b);
  EXPECT_EQ(CheckBatch(*b), (std::vector<uint64_t>{4, 5}));
  EXPECT_TRUE(a.Finished());
  std::vector<SampleKey> failed;
  while (auto e = a.TakeError()) failed.push_back(e->first);
  EXPECT_EQ(failed, (std::vector<SampleKey>{KeyOf(1), KeyOf(6), KeyOf(7)}));
  EXPECT_EQ(a.done_watermark(), 8u);
  // Every byte reserved was given back or is held by the handed-out batches.
  b.reset();
  EXPECT_EQ(account_->in_batches.load(), 0);
}

TEST_F(AssemblerTest, OrderedBatchOfHolesIsSkipped) {
  MakePool(1 << 20);
  BatchAssembler::Options o;
  o.batch_size = 2;
  o.ordered = true;
  o.queue_errors = false;  // OnMissing::kSkip
  BatchAssembler a(o, 6, pool_);
  std::map<uint64_t, Slot> slots;
  for (uint64_t s : {5, 0, 4, 1}) slots[s] = Reserve(a, s);
  Slot none;
  // Batch 1 (samples 2, 3) fails entirely, one sample with a slot, one without.
  slots[2] = Reserve(a, 2);
  a.Fail(2, KeyOf(2), slots[2], Status::NotFound("gone"));
  EXPECT_TRUE(a.Fail(3, KeyOf(3), none, Status::NotFound("gone")).batch_finished);
  for (uint64_t s : {5, 4, 1, 0}) Complete(a, slots[s], s);
  auto b0 = a.TakeReady();
  auto b1 = a.TakeReady();
  ASSERT_TRUE(b0 && b1);
  EXPECT_EQ(CheckBatch(*b0), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(CheckBatch(*b1), (std::vector<uint64_t>{4, 5}));
  EXPECT_EQ(b1->index, 1);  // numbered in hand-out order: no gap
  EXPECT_FALSE(a.TakeReady());
  EXPECT_FALSE(a.HasErrors());
  EXPECT_TRUE(a.Finished());
}

TEST_F(AssemblerTest, SamplesThatDoNotFitGetTheirOwnBufferAndAreJoined) {
  for (bool ordered : {false, true}) {
    SCOPED_TRACE(ordered ? "ordered" : "out-of-order");
    pool_.reset();
    // A buffer is a page (at least): room for two samples, not three.
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    MakePool(page);
    unit_ = page * 3 / 8;
    BatchAssembler a = Make(5, ordered, 5);
    std::map<uint64_t, Slot> slots;
    for (uint64_t s : {4, 3, 2, 1, 0}) slots[s] = Reserve(a, s);
    for (uint64_t s : {0, 2, 4, 1, 3}) Complete(a, slots[s], s);
    auto b = a.TakeReady();
    ASSERT_TRUE(b);
    const auto seqs = CheckBatch(*b);
    if (ordered) {
      EXPECT_EQ(seqs, (std::vector<uint64_t>{0, 1, 2, 3, 4}));
    } else {
      // Placed in the batch's buffer first (4 and 3), the rest from their
      // own buffers, in slot order.
      EXPECT_EQ(seqs, (std::vector<uint64_t>{4, 3, 2, 1, 0}));
    }
    b.reset();
    EXPECT_EQ(account_->in_batches.load(), 0);
  }
}

// The account is the memory the batches hold: a batch assembled in a
// recycled buffer is charged the pages the buffer kept, though its first
// samples are fewer bytes; nothing is charged twice and all is given back.
TEST_F(AssemblerTest, ABatchInARecycledBufferIsChargedItsKeptPages) {
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  unit_ = static_cast<uint64_t>(page);  // 4 samples of a page and a bit: 5 pages at least
  BatchAssembler a = Make(4, false, 8);
  std::map<uint64_t, Slot> slots;
  for (uint64_t s : {0, 1, 2, 3}) slots[s] = Reserve(a, s);
  const int64_t first = account_->in_batches.load();
  EXPECT_EQ(first, static_cast<int64_t>(PageRound(4 * unit_ + 0 + 1 + 2 + 3)));  // charged in whole pages
  for (uint64_t s : {0, 1, 2, 3}) Complete(a, slots[s], s);
  auto b = a.TakeReady();
  ASSERT_TRUE(b);
  b.reset();  // back to the pool, its pages kept
  const int64_t kept = account_->pooled_resident.load();
  EXPECT_GE(kept, first);
  EXPECT_EQ(account_->in_batches.load(), 0);
  // The next batch takes the same buffer: its kept pages are charged as soon
  // as it is taken, and a first sample within them adds nothing.
  slots[4] = Reserve(a, 4);
  EXPECT_EQ(account_->pooled_resident.load(), 0);
  EXPECT_EQ(account_->in_batches.load(), kept);
  for (uint64_t s : {5, 6, 7}) slots[s] = Reserve(a, s);
  EXPECT_EQ(account_->in_batches.load(),
            std::max<int64_t>(kept, static_cast<int64_t>(PageRound(4 * unit_ + 4 + 5 + 6 + 0))));
  for (uint64_t s : {4, 5, 6, 7}) Complete(a, slots[s], s);
  b = a.TakeReady();
  ASSERT_TRUE(b);
  EXPECT_EQ(CheckBatch(*b), (std::vector<uint64_t>{4, 5, 6, 7}));
  b.reset();
  EXPECT_EQ(account_->in_batches.load(), 0);
  EXPECT_GT(account_->pooled_resident.load(), 0);
}

// OpenSlots: where samples without a slot may land besides new batches.
TEST_F(AssemblerTest, OpenSlotsAreTheFreeSlotsOfOpenBatches) {
  {
    BatchAssembler a = Make(4, false, 8);
    EXPECT_EQ(a.OpenSlots(), 0u);  // no batch open yet
    Slot s0 = Reserve(a, 0);
    EXPECT_EQ(a.OpenSlots(), 3u);
    Slot s1 = Reserve(a, 1), s2 = Reserve(a, 2), s3 = Reserve(a, 3);
    EXPECT_EQ(a.OpenSlots(), 0u);  // sealed: the next sample opens a new batch
  }
  {
    BatchAssembler a = Make(2, true, 6);
    Slot s5 = Reserve(a, 5);  // opens batch 2
    EXPECT_EQ(a.OpenSlots(), 1u);
    Slot none;
    a.Fail(3, KeyOf(3), none, Status::NotFound("gone"));  // opens batch 1 for its hole
    EXPECT_EQ(a.OpenSlots(), 2u);
    Slot s0 = Reserve(a, 0);  // opens batch 0
    EXPECT_EQ(a.OpenSlots(), 3u);
    Slot s2 = Reserve(a, 2), s4 = Reserve(a, 4), s1 = Reserve(a, 1);
    EXPECT_EQ(a.OpenSlots(), 0u);
  }
}

TEST_F(AssemblerTest, CheckpointBookkeepingFollowsHandOut) {
  BatchAssembler a = Make(2, false, 6);
  std::map<uint64_t, Slot> slots;
  for (uint64_t s : {3, 4, 0, 1}) slots[s] = Reserve(a, s);
  for (uint64_t s : {3, 4}) Complete(a, slots[s], s);
  ASSERT_TRUE(a.TakeReady());
  EXPECT_EQ(a.done_watermark(), 0u);
  EXPECT_EQ(a.done_above(), (std::set<uint64_t>{3, 4}));
  Slot none;
  a.Fail(2, KeyOf(2), none, Status::NotFound("gone"));  // failed: done too
  for (uint64_t s : {0, 1}) Complete(a, slots[s], s);
  EXPECT_EQ(a.done_watermark(), 0u);  // ready but not handed out: not done
  ASSERT_TRUE(a.TakeReady());
  EXPECT_EQ(a.done_watermark(), 5u);
  EXPECT_TRUE(a.done_above().empty());
}

TEST_F(AssemblerTest, MultilabelsFollowTheirSamples) {
  BatchAssembler a = Make(3, false, 3);
  std::map<uint64_t, Slot> slots;
  for (uint64_t s : {0, 1, 2}) slots[s] = Reserve(a, s);
  Slot none;
  a.Fail(1, KeyOf(1), slots[1], Status::Corruption("bad"));
  for (uint64_t s : {2, 0}) {
    SampleFields f;
    f.label = static_cast<int32_t>(s);
    f.labels = std::vector<int32_t>{static_cast<int32_t>(s), 9};
    a.Complete(slots[s], f);
  }
  auto b = a.TakeReady();
  ASSERT_TRUE(b);
  ASSERT_EQ(b->size(), 2u);
  ASSERT_EQ(b->multilabels.size(), 2u);
  for (size_t i = 0; i < b->size(); ++i) {
    EXPECT_EQ(b->multilabels[i], (std::vector<int32_t>{b->labels[i], 9}));
  }
}

// Memory that runs out and comes back: a pool whose buffers are too large to
// ever be mapped, so it hands out only the (page-sized) buffers given to it.
class OutOfMemoryTest : public AssemblerTest {
 protected:
  void SetUp() override {
    MakePool(size_t{1} << 50);  // more address space than a process has
    ASSERT_FALSE(pool_->Acquire().ok()) << "a buffer of 1 PiB was mapped: this test cannot starve the pool";
  }
  // Memory frees: the pool has one more (page-sized) buffer to hand out.
  void FreeOneBuffer() {
    auto b = BatchBuffer::Reserve(static_cast<size_t>(::sysconf(_SC_PAGESIZE)));
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    pool_->Release(std::move(*b), 0);
  }
};

// Samples that fail before they have a slot while no batch buffer can be had
// are still holes of their ordered batch: a sibling that reserves the batch
// once memory is back does not wait for them, and a batch whose every sample
// failed that way is skipped, not waited for.
TEST_F(OutOfMemoryTest, OrderedHolesWithoutMemoryAreKept) {
  BatchAssembler a = Make(2, true, 6);
  for (uint64_t s : {1, 2, 3}) {
    Slot none;
    a.Fail(s, KeyOf(s), none, Status::NotFound("gone"));
  }
  EXPECT_FALSE(a.Reserve(0, KeyOf(0), SizeOf(0)).ok());  // still no memory
  FreeOneBuffer();
  FreeOneBuffer();
  std::map<uint64_t, Slot> slots;
  for (uint64_t s : {4, 0, 5}) slots[s] = Reserve(a, s);
  EXPECT_TRUE(Complete(a, slots[0], 0).batch_finished);  // sample 1 is a hole
  Complete(a, slots[4], 4);
  EXPECT_TRUE(Complete(a, slots[5], 5).batch_finished);
  ASSERT_TRUE(a.Settled());
  auto b0 = a.TakeReady();
  auto b1 = a.TakeReady();  // past batch 1, every sample of which failed
  ASSERT_TRUE(b0 && b1);
  EXPECT_EQ(CheckBatch(*b0), (std::vector<uint64_t>{0}));
  EXPECT_EQ(CheckBatch(*b1), (std::vector<uint64_t>{4, 5}));
  EXPECT_EQ(b1->index, 1);
  EXPECT_TRUE(a.Finished());
  EXPECT_EQ(a.done_watermark(), 6u);
  std::vector<SampleKey> failed;
  while (auto e = a.TakeError()) failed.push_back(e->first);
  EXPECT_EQ(failed, (std::vector<SampleKey>{KeyOf(1), KeyOf(2), KeyOf(3)}));
}

// Samples lost because their batch's buffers could not be joined are queued
// as errors and, like failed samples, done: the checkpoint does not owe them
// and the watermark moves past them.
TEST_F(OutOfMemoryTest, SamplesLostWhenJoiningAreDone) {
  for (bool ordered : {false, true}) {
    SCOPED_TRACE(ordered ? "ordered" : "out-of-order");
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    MakePool(size_t{1} << 50);  // a starved pool again
    FreeOneBuffer();
    unit_ = page * 3 / 2;  // no sample fits in the batch buffer: each gets its own
    BatchAssembler a = Make(2, ordered, 3);
    std::map<uint64_t, Slot> slots;
    for (uint64_t s : {1, 0}) slots[s] = Reserve(a, s);
    Complete(a, slots[1], 1);
    // No buffer to join samples 0 and 1 into.
    const AssemblyProgress p = Complete(a, slots[0], 0);
    EXPECT_TRUE(p.batch_finished);
    EXPECT_EQ(p.lost, 2);
    EXPECT_FALSE(a.TakeReady());
    EXPECT_EQ(a.done_watermark(), 2u);
    EXPECT_TRUE(a.done_above().empty());
    // The rest of the epoch goes on, and moves the watermark.
    FreeOneBuffer();
    unit_ = 10;
    slots[2] = Reserve(a, 2);
    Complete(a, slots[2], 2);
    auto b = a.TakeReady();
    ASSERT_TRUE(b);
    EXPECT_EQ(CheckBatch(*b), (std::vector<uint64_t>{2}));
    EXPECT_TRUE(a.Finished());
    EXPECT_EQ(a.done_watermark(), 3u);
    EXPECT_TRUE(a.done_above().empty());
    std::vector<SampleKey> failed;
    while (auto e = a.TakeError()) failed.push_back(e->first);
    EXPECT_EQ(failed.size(), 2u);
    EXPECT_EQ(std::set<SampleKey>(failed.begin(), failed.end()), (std::set<SampleKey>{KeyOf(0), KeyOf(1)}));
    b.reset();
    EXPECT_EQ(account_->in_batches.load(), 0);
  }
}

TEST_F(AssemblerTest, EmptyEpochAndEmptyBatch) {
  BatchAssembler a = Make(4, true, 0);
  EXPECT_TRUE(a.Finished());
  EXPECT_FALSE(a.TakeReady());
  auto e = EmptyBatch(-1);
  EXPECT_EQ(e->epoch, -1);
  EXPECT_EQ(e->size(), 0u);
  EXPECT_TRUE(e->data().empty());
}

}  // namespace
}  // namespace cqlstream::loader
