// Copyright (c) cqlstream authors.
#include "loader/buffer_pool.h"

#include <gtest/gtest.h>

#include <cstring>

namespace cqlstream::loader {
namespace {

TEST(BufferPoolTest, BatchReservationNeverOverflowsAndIsCapped) {
  EXPECT_EQ(BatchReservation(256, 1000), 256u * 1000u + (1u << 20));
  EXPECT_EQ(BatchReservation(1, 0), 1u + (1u << 20));
  EXPECT_EQ(BatchReservation(0, -5), 1u + (1u << 20));
  // The catalog's max_size is a hint: absurd values must neither wrap (the
  // old batch_size x max_size + 1 MiB did) nor reserve more than the cap.
  EXPECT_EQ(BatchReservation(512, INT64_MAX), kMaxBatchReservation);
  EXPECT_EQ(BatchReservation(INT32_MAX, INT64_MAX / 2), kMaxBatchReservation);
  EXPECT_EQ(BatchReservation(int64_t{1} << 33, int64_t{1} << 31), kMaxBatchReservation);
  EXPECT_EQ(BatchReservation(512, 4 << 20), kMaxBatchReservation);
  EXPECT_LE(BatchReservation(1023, 1 << 20), kMaxBatchReservation);
}

TEST(BufferPoolTest, ReservesAddressSpaceAndRecycles) {
  auto account = std::make_shared<MemoryAccount>();
  // 8 GiB of address space per buffer costs nothing until written.
  BufferPool pool(size_t{8} << 30, 2, account);
  auto a = pool.Acquire();
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  uint8_t* base = (*a)->data();
  std::memset(base, 7, 1 << 20);
  pool.Release(std::move(*a), 1 << 20);
  EXPECT_GE(account->pooled_resident.load(), 1 << 20);
  auto b = pool.Acquire();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->data(), base);  // the same buffer came back
  EXPECT_EQ(account->pooled_resident.load(), 0);
  EXPECT_EQ((*b)->data()[100], 7);  // kept pages keep their bytes
}

TEST(BufferPoolTest, TrimsOutliersAndBoundsThePool) {
  auto account = std::make_shared<MemoryAccount>();
  BufferPool pool(size_t{1} << 30, 1, account);
  auto a = pool.Acquire();
  auto b = pool.Acquire();
  ASSERT_TRUE(a.ok() && b.ok());
  std::memset((*a)->data(), 1, 64 << 20);
  pool.Release(std::move(*a), 64 << 20);
  // The pool keeps at most 1 buffer; the second is unmapped.
  pool.Release(std::move(*b), 4096);
  EXPECT_LE(account->pooled_resident.load(), static_cast<int64_t>(81u << 20));
}

// A recycled buffer's kept pages are charged from the moment it leaves the
// pool (they are memory whether or not the next batch fills them); bytes
// written within them add nothing, bytes beyond them add what they add.
TEST(BufferPoolTest, ARecycledBuffersKeptPagesAreChargedUntilReleased) {
  auto account = std::make_shared<MemoryAccount>();
  BufferPool pool(size_t{64} << 20, 2, account);
  auto a = pool.Acquire();
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(account->in_batches.load(), 0);  // a fresh buffer: nothing resident
  pool.Charge(**a, 3 << 20);
  std::memset((*a)->data(), 1, 3 << 20);
  EXPECT_EQ(account->in_batches.load(), 3 << 20);
  pool.Release(std::move(*a), 3 << 20);
  EXPECT_EQ(account->in_batches.load(), 0);
  const int64_t kept = account->pooled_resident.load();
  EXPECT_GE(kept, 3 << 20);
  auto b = pool.Acquire();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(account->pooled_resident.load(), 0);
  EXPECT_EQ(account->in_batches.load(), kept);  // moved, not dropped
  EXPECT_EQ(account->total(), kept);
  pool.Charge(**b, 1 << 20);  // within the kept pages
  EXPECT_EQ(account->in_batches.load(), kept);
  pool.Charge(**b, static_cast<size_t>(kept) + 4096);  // 4 KiB past them
  EXPECT_EQ(account->in_batches.load(), kept + 4096);
  EXPECT_EQ((*b)->charged(), static_cast<size_t>(kept) + 4096);
  pool.Release(std::move(*b), 1 << 20);
  EXPECT_EQ(account->in_batches.load(), 0);
  // A buffer reserved outside the pool (a batch joined into one larger than
  // the pool's buffers) is charged and given back the same way.
  auto own = BatchBuffer::Reserve(size_t{128} << 20);
  ASSERT_TRUE(own.ok());
  pool.Charge(**own, 5000);
  std::memset((*own)->data(), 2, 5000);
  EXPECT_EQ(account->in_batches.load(), 5000);
  pool.Release(std::move(*own), 5000);
  EXPECT_EQ(account->in_batches.load(), 0);
}

// Incoming bytes fill free slots of open batches (new memory, as far as
// the estimate knows) and then new batches, whose buffers are pooled ones
// first: pooled pages they will fill are neither counted twice nor worth
// giving back.
TEST(BufferPoolTest, IncomingBytesLandInOpenBatchesThenInPooledBuffers) {
  constexpr int64_t M = 1 << 20;
  auto e = EstimateLanded(100 * M, 280 * M, 440 * M, 0);  // more incoming than pooled
  EXPECT_EQ(e.landed, 540 * M);
  EXPECT_EQ(e.shrinkable, 0);
  e = EstimateLanded(100 * M, 280 * M, 80 * M, 0);  // fewer incoming: 200 MiB of pooled pages stay unused
  EXPECT_EQ(e.landed, 380 * M);
  EXPECT_EQ(e.shrinkable, 200 * M);
  // 50 MiB go to an open batch: only 30 MiB reach pooled buffers.
  e = EstimateLanded(100 * M, 280 * M, 80 * M, 50 * M);
  EXPECT_EQ(e.landed, 430 * M);
  EXPECT_EQ(e.shrinkable, 250 * M);
  // Everything into open batches (ordered mode, many batches open): the
  // pool is spared nothing, and counted in full.
  e = EstimateLanded(100 * M, 280 * M, 440 * M, 440 * M);
  EXPECT_EQ(e.landed, 820 * M);
  EXPECT_EQ(e.shrinkable, 280 * M);
  e = EstimateLanded(100 * M, 280 * M, 440 * M, 900 * M);  // at most all incoming
  EXPECT_EQ(e.landed, 820 * M);
  e = EstimateLanded(0, 0, 0, 0);
  EXPECT_EQ(e.landed, 0);
  EXPECT_EQ(e.shrinkable, 0);
  e = EstimateLanded(-5, -5, -5, -5);  // a transiently negative counter counts as nothing
  EXPECT_EQ(e.landed, 0);
  EXPECT_EQ(e.shrinkable, 0);
}

}  // namespace
}  // namespace cqlstream::loader
