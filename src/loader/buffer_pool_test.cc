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

}  // namespace
}  // namespace cqlstream::loader
