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
  const auto past = static_cast<int64_t>(PageRound(static_cast<size_t>(kept) + 1));  // a page past them
  pool.Charge(**b, static_cast<size_t>(kept) + 1);
  EXPECT_EQ(account->in_batches.load(), past);
  EXPECT_EQ((*b)->charged(), static_cast<size_t>(past));
  pool.Release(std::move(*b), 1 << 20);
  EXPECT_EQ(account->in_batches.load(), 0);
  // A buffer reserved outside the pool (a batch joined into one larger than
  // the pool's buffers) is charged and given back the same way.
  auto own = BatchBuffer::Reserve(size_t{128} << 20);
  ASSERT_TRUE(own.ok());
  pool.Charge(**own, 5000);
  std::memset((*own)->data(), 2, 5000);
  EXPECT_EQ(account->in_batches.load(), static_cast<int64_t>(PageRound(5000)));  // whole pages
  pool.Release(std::move(*own), 5000);
  EXPECT_EQ(account->in_batches.load(), 0);
}

// The peak is the most the account held after new bytes were charged: a
// buffer's kept pages moving from the pool to a batch and back add nothing,
// pages written past them do.
TEST(BufferPoolTest, ThePeakFollowsNewBytesNotMoves) {
  auto account = std::make_shared<MemoryAccount>();
  BufferPool pool(size_t{64} << 20, 2, account);
  EXPECT_EQ(account->peak(), 0);
  auto a = pool.Acquire();
  auto b = pool.Acquire();
  ASSERT_TRUE(a.ok() && b.ok());
  pool.Charge(**a, 3 << 20);
  std::memset((*a)->data(), 1, 3 << 20);
  pool.Charge(**b, 2 << 20);
  std::memset((*b)->data(), 1, 2 << 20);
  EXPECT_EQ(account->peak(), 5 << 20);  // both batches at once
  pool.Release(std::move(*a), 3 << 20);
  pool.Release(std::move(*b), 2 << 20);
  EXPECT_EQ(account->in_batches.load(), 0);
  EXPECT_EQ(account->peak(), 5 << 20);  // kept when the batches go
  const int64_t pooled = account->pooled_resident.load();
  ASSERT_LE(pooled, 5 << 20);
  auto c = pool.Acquire();  // kept pages moved back to a batch: no new bytes
  ASSERT_TRUE(c.ok());
  const auto kept = static_cast<size_t>(account->in_batches.load());
  pool.Charge(**c, kept);
  EXPECT_EQ(account->peak(), 5 << 20);
  // Written past them while the other buffer is still pooled: the total then.
  pool.Charge(**c, kept + (4 << 20));
  EXPECT_EQ(account->peak(), account->total());
  EXPECT_EQ(account->peak(), pooled + static_cast<int64_t>(PageRound(4 << 20)));
  pool.Release(std::move(*c), kept + (4 << 20));
}

// Incoming bytes fill free slots of open batches (new memory, as far as
// the estimate knows) and then new batches, whose buffers are pooled ones
// first: pooled pages they will fill are neither counted twice nor worth
// giving back, less one batch for each batch that may be left partly filled.
TEST(BufferPoolTest, IncomingBytesLandInOpenBatchesThenInPooledBuffers) {
  constexpr int64_t M = 1 << 20;
  BudgetInputs in;
  in.in_batches = 100 * M;
  in.pooled = 280 * M;    // 5 buffers of 56 MiB
  in.reusable = 250 * M;  // of which batches of 50 MiB fill 50 each
  in.batch_bytes = 50 * M;
  in.partial_batches = 1;
  in.incoming = 440 * M;  // more than the pool: 250 reused, less a partial batch's 50
  auto e = EstimateLanded(in);
  EXPECT_EQ(e.landed, 620 * M);
  EXPECT_EQ(e.shrinkable, 80 * M);
  in.incoming = 80 * M;  // fewer: 30 MiB of pooled pages credited
  e = EstimateLanded(in);
  EXPECT_EQ(e.landed, 430 * M);
  EXPECT_EQ(e.shrinkable, 250 * M);
  in.into_open = 50 * M;  // 50 of them go to an open batch: no credit left
  e = EstimateLanded(in);
  EXPECT_EQ(e.landed, 460 * M);
  EXPECT_EQ(e.shrinkable, 280 * M);
  in.into_open = 900 * M;  // at most all incoming
  EXPECT_EQ(EstimateLanded(in).landed, 460 * M);
  in.into_open = 0;
  in.incoming = 440 * M;
  in.partial_batches = 0;  // every new batch full: all reusable pages credited
  e = EstimateLanded(in);
  EXPECT_EQ(e.landed, 570 * M);
  EXPECT_EQ(e.shrinkable, 30 * M);
  in.headroom = 50 * M;  // e.g. ordered mode's compaction copy
  EXPECT_EQ(EstimateLanded(in).landed, 620 * M);
  // Whole pages: 2 open batches and 9 new full ones (440 / 50, rounded up)
  // may each add a page beyond their bytes.
  in.page = 4096;
  in.open_batches = 2;
  EXPECT_EQ(EstimateLanded(in).landed, 620 * M + 11 * 4096);
  // Nothing pooled: everything incoming is new memory.
  BudgetInputs none;
  none.in_batches = 10 * M;
  none.incoming = 20 * M;
  none.reusable = 0;
  e = EstimateLanded(none);
  EXPECT_EQ(e.landed, 30 * M);
  EXPECT_EQ(e.shrinkable, 0);
  BudgetInputs neg{-5, -5, -5, -5, -5, -5, -5, -5};  // transiently negative counters count as nothing
  e = EstimateLanded(neg);
  EXPECT_EQ(e.landed, 0);
  EXPECT_EQ(e.shrinkable, 0);
}

// New batches take the buffer with the most kept pages; the budget gives
// back those with the fewest first.
TEST(BufferPoolTest, AcquireTakesTheMostKeptPagesAndShrinkTheFewest) {
  constexpr size_t M = 1 << 20;
  auto account = std::make_shared<MemoryAccount>();
  BufferPool pool(64 * M, 3, account);
  std::vector<std::unique_ptr<BatchBuffer>> bufs;
  for (int i = 0; i < 3; ++i) {
    auto b = pool.Acquire();
    ASSERT_TRUE(b.ok());
    bufs.push_back(std::move(*b));
  }
  const uint8_t* three = bufs[0]->data();
  const uint8_t* one = bufs[1]->data();
  // Released in this order nothing is trimmed (each is under 1.25x the
  // running average of used bytes): they keep 3, 1 and 2 MiB.
  size_t mib[] = {3, 1, 2};
  for (int i = 0; i < 3; ++i) {
    pool.Charge(*bufs[static_cast<size_t>(i)], mib[i] * M);
    std::memset(bufs[static_cast<size_t>(i)]->data(), 1, mib[i] * M);
    pool.Release(std::move(bufs[static_cast<size_t>(i)]), mib[i] * M);
  }
  EXPECT_EQ(account->pooled_resident.load(), static_cast<int64_t>(6 * M));
  // What new batches of 2 MiB would refill: each takes one buffer, the most
  // kept pages first (3 -> 2 of them, then 2, then 1).
  EXPECT_EQ(pool.Reusable(static_cast<int64_t>(2 * M), 3), static_cast<int64_t>(5 * M));
  EXPECT_EQ(pool.Reusable(static_cast<int64_t>(2 * M), 2), static_cast<int64_t>(4 * M));
  EXPECT_EQ(pool.Reusable(static_cast<int64_t>(2 * M), 1), static_cast<int64_t>(2 * M));
  EXPECT_EQ(pool.Reusable(static_cast<int64_t>(2 * M), 0), 0);
  // Batches of 8 MiB: one new batch refills only its own buffer's 3 MiB,
  // not the 6 MiB the pool keeps (buffers that kept less than a batch).
  EXPECT_EQ(pool.Reusable(static_cast<int64_t>(8 * M), 1), static_cast<int64_t>(3 * M));
  auto top = pool.Acquire();
  ASSERT_TRUE(top.ok());
  EXPECT_EQ((*top)->data(), three);
  EXPECT_EQ(account->in_batches.load(), static_cast<int64_t>(3 * M));
  pool.Release(std::move(*top), 3 * M);
  // Shrinking by one byte gives back the buffer that kept the fewest.
  EXPECT_EQ(pool.Shrink(1), static_cast<int64_t>(M));
  EXPECT_EQ(account->pooled_resident.load(), static_cast<int64_t>(5 * M));
  for (int i = 0; i < 2; ++i) {
    auto b = pool.Acquire();
    ASSERT_TRUE(b.ok());
    EXPECT_NE((*b)->data(), one);
    bufs[static_cast<size_t>(i)] = std::move(*b);
  }
}

}  // namespace
}  // namespace cqlstream::loader
