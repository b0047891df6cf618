// Copyright (c) cqlstream authors.
#include "epoch_assembler.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <numeric>

#include "shard_plan.h"

namespace cqlstream::dali_plugin {
namespace {

// A batch whose sample i holds one byte (the key's low byte).
class FakeBatch final : public Batch {
 public:
  explicit FakeBatch(const std::vector<SampleKey>& ks) {
    for (SampleKey k : ks) {
      offsets.push_back(bytes_.size());
      bytes_.push_back(static_cast<uint8_t>(k));
      sizes.push_back(1);
      image_sizes.push_back(1);
      labels.push_back(static_cast<int32_t>(k % 10));
      keys.push_back(k);
    }
  }
  std::span<const uint8_t> data() const override { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// A loader stand-in: per epoch, the given batches, then nullptr.
struct FakeLoader {
  std::vector<std::vector<std::vector<SampleKey>>> epochs;  // epochs[e][batch] = keys
  size_t epoch = 0, batch = 0;
  int next_calls = 0;
  std::vector<std::vector<SampleKey>> fetches;
  Status fail_next;  // returned once by the next call when set

  StatusOr<BatchPtr> Next() {
    ++next_calls;
    if (!fail_next.ok()) {
      Status s = fail_next;
      fail_next = Status::OK();
      return s;
    }
    const auto& e = epochs[epoch % epochs.size()];
    if (batch == e.size()) {
      ++epoch;
      batch = 0;
      return BatchPtr();
    }
    return BatchPtr(std::make_shared<FakeBatch>(e[batch++]));
  }
  StatusOr<BatchPtr> Fetch(const std::vector<SampleKey>& keys) {
    fetches.push_back(keys);
    return BatchPtr(std::make_shared<FakeBatch>(keys));
  }
  EpochAssembler Make(int b, uint64_t batches_per_epoch, uint64_t shard_samples) {
    return EpochAssembler(
        b, batches_per_epoch, shard_samples, [this] { return Next(); },
        [this](const std::vector<SampleKey>& k) { return Fetch(k); });
  }
};

std::vector<SampleKey> Keys(const std::vector<SampleRef>& refs) {
  std::vector<SampleKey> k;
  for (const auto& r : refs) k.push_back(r.batch->keys[r.index]);
  return k;
}
int Padding(const std::vector<SampleRef>& refs) {
  int n = 0;
  for (const auto& r : refs) n += r.padding ? 1 : 0;
  return n;
}

TEST(EpochAssembler, PadsTheLastBatchWithTheLastSample) {
  FakeLoader l;
  l.epochs = {{{1, 2, 3}, {4, 5}}};  // 5 samples, B = 3
  auto a = l.Make(3, 2, 5);
  std::vector<SampleRef> out;
  ASSERT_TRUE(a.NextBatch(&out).ok());
  EXPECT_EQ(Keys(out), (std::vector<SampleKey>{1, 2, 3}));
  ASSERT_TRUE(a.NextBatch(&out).ok());
  EXPECT_EQ(Keys(out), (std::vector<SampleKey>{4, 5, 5}));
  EXPECT_EQ(Padding(out), 1);
  // The next epoch starts fresh (the loader's end marker was consumed).
  ASSERT_TRUE(a.NextBatch(&out).ok());
  EXPECT_EQ(Keys(out), (std::vector<SampleKey>{1, 2, 3}));
  EXPECT_EQ(Padding(out), 0);
  EXPECT_EQ(a.epoch(), 1);
}

TEST(EpochAssembler, ExactEpochConsumesTheEndMarkerLazily) {
  FakeLoader l;
  l.epochs = {{{1, 2}, {3, 4}}};
  auto a = l.Make(2, 2, 4);
  std::vector<SampleRef> out;
  ASSERT_TRUE(a.NextBatch(&out).ok());
  ASSERT_TRUE(a.NextBatch(&out).ok());
  EXPECT_EQ(Keys(out), (std::vector<SampleKey>{3, 4}));
  EXPECT_EQ(l.next_calls, 2);  // no blocking look-ahead at the end of an epoch
  ASSERT_TRUE(a.NextBatch(&out).ok());
  EXPECT_EQ(Keys(out), (std::vector<SampleKey>{1, 2}));
  EXPECT_EQ(l.next_calls, 4);  // the marker, then the new epoch's batch
}

TEST(EpochAssembler, WholeBatchesOfPaddingForSmallerShards) {
  // A shard of 3 samples in an epoch of ceil(10/3) = 4 slots, B = 1 (DALI: 4 batches).
  FakeLoader l;
  l.epochs = {{{7}, {8}, {9}}};
  auto a = l.Make(1, BatchesPerEpoch(10, 3, 1), 3);
  std::vector<SampleKey> seen;
  int padding = 0;
  for (int i = 0; i < 8; ++i) {
    std::vector<SampleRef> out;
    ASSERT_TRUE(a.NextBatch(&out).ok());
    ASSERT_EQ(out.size(), 1u);
    seen.push_back(out[0].batch->keys[out[0].index]);
    padding += Padding(out);
  }
  EXPECT_EQ(seen, (std::vector<SampleKey>{7, 8, 9, 9, 7, 8, 9, 9}));
  EXPECT_EQ(padding, 2);
}

TEST(EpochAssembler, ShortLoaderBatchesAreSplitAcrossDaliBatches) {
  // A skipped sample made the loader's first batch short: 3 + 4 samples, B = 4, 8 slots.
  FakeLoader l;
  l.epochs = {{{1, 2, 3}, {4, 5, 6, 7}}};
  auto a = l.Make(4, 2, 8);
  std::vector<SampleRef> out;
  ASSERT_TRUE(a.NextBatch(&out).ok());
  EXPECT_EQ(Keys(out), (std::vector<SampleKey>{1, 2, 3, 4}));
  ASSERT_TRUE(a.NextBatch(&out).ok());
  EXPECT_EQ(Keys(out), (std::vector<SampleKey>{5, 6, 7, 7}));  // the skipped one becomes padding
}

TEST(EpochAssembler, LoaderErrorsPassThrough) {
  FakeLoader l;
  l.epochs = {{{1, 2}}};
  l.fail_next = Status::NotFound("sample 0:1 (train/x.png) could not be read");
  auto a = l.Make(2, 1, 2);
  std::vector<SampleRef> out;
  Status s = a.NextBatch(&out);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_NE(s.message().find("0:1"), std::string::npos);
}

TEST(EpochAssembler, MoreSamplesThanTheShardIsAnError) {
  FakeLoader l;
  l.epochs = {{{1, 2, 3}}};
  auto a = l.Make(2, 1, 2);  // the shard should hold 2
  std::vector<SampleRef> out;
  ASSERT_TRUE(a.NextBatch(&out).ok());
  EXPECT_EQ(a.NextBatch(&out).code(), Status::Code::kInternal);
}

TEST(EpochAssembler, NothingToPadWithIsAnError) {
  FakeLoader l;
  l.epochs = {{}};  // every sample of the shard skipped
  auto a = l.Make(2, 1, 2);
  std::vector<SampleRef> out;
  EXPECT_EQ(a.NextBatch(&out).code(), Status::Code::kNotFound);
}

TEST(EpochAssembler, SaveAndRestoreKeepsPendingAndPadding) {
  FakeLoader l;
  l.epochs = {{{1, 2, 3}, {4, 5}}};  // 5 samples, B = 2, 3 batches per epoch
  auto a = l.Make(2, 3, 5);
  std::vector<SampleRef> out;
  ASSERT_TRUE(a.NextBatch(&out).ok());  // 1 2; 3 pending
  ReaderCheckpoint c;
  a.SaveTo(&c);
  EXPECT_EQ(c.slot, 2u);
  EXPECT_EQ(c.pending, (std::vector<SampleKey>{3}));
  EXPECT_TRUE(c.has_last);
  EXPECT_EQ(c.last_key, 2u);

  // A restored assembler: its loader continues after batch {1, 2, 3}.
  FakeLoader l2;
  l2.epochs = {{{4, 5}}};
  auto b = l2.Make(2, 3, 5);
  ASSERT_TRUE(b.RestoreFrom(c).ok());
  EXPECT_EQ(l2.fetches, (std::vector<std::vector<SampleKey>>{{3}}));
  ASSERT_TRUE(b.NextBatch(&out).ok());
  EXPECT_EQ(Keys(out), (std::vector<SampleKey>{3, 4}));
  ASSERT_TRUE(b.NextBatch(&out).ok());
  EXPECT_EQ(Keys(out), (std::vector<SampleKey>{5, 5}));

  // Restored in the middle of the padding: the last sample is fetched again.
  ReaderCheckpoint p;
  p.slot = 4;
  p.real = 4;
  p.loader_ended = true;
  p.has_last = true;
  p.last_key = 4;
  FakeLoader l3;
  l3.epochs = {{{1, 2}, {3, 4}}};
  auto c3 = l3.Make(2, 3, 5);
  ASSERT_TRUE(c3.RestoreFrom(p).ok());
  ASSERT_TRUE(c3.NextBatch(&out).ok());
  EXPECT_EQ(Keys(out), (std::vector<SampleKey>{4, 4}));
  EXPECT_EQ(Padding(out), 2);
  EXPECT_EQ(l3.next_calls, 0);
  ASSERT_TRUE(c3.NextBatch(&out).ok());  // next epoch, no marker owed
  EXPECT_EQ(Keys(out), (std::vector<SampleKey>{1, 2}));
}

TEST(EpochAssembler, RestoreRejectsPositionsOutsideTheEpoch) {
  FakeLoader l;
  l.epochs = {{{1}}};
  auto a = l.Make(2, 1, 1);
  ReaderCheckpoint c;
  c.slot = 3;
  EXPECT_EQ(a.RestoreFrom(c).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace cqlstream::dali_plugin
