// Copyright (c) cqlstream authors.
#include "store/byte_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

namespace cqlstream::store {
namespace {

TEST(ByteBudget, TakesWhatFitsAndAlwaysOneHolding) {
  ByteBudget b(100);
  EXPECT_TRUE(b.TryTake(60));
  EXPECT_FALSE(b.TryTake(50));        // 110 > 100
  EXPECT_TRUE(b.TryTake(50, true));   // forced: the holder the run waits for
  EXPECT_EQ(b.held(), 110);
  b.Give(110);
  EXPECT_TRUE(b.TryTake(500));        // nothing held: one holding larger than the budget moves
  EXPECT_FALSE(b.TryTake(1));
  b.Adjust(500, 40);                  // what was really read
  EXPECT_EQ(b.held(), 40);
  EXPECT_TRUE(b.TryTake(60));
  EXPECT_EQ(b.held(), 100);
}

TEST(ByteBudget, TakeWaitsUntilBytesAreGivenBack) {
  ByteBudget b(100);
  b.Take(80);
  std::atomic<bool> taken{false};
  std::thread t([&] {
    b.Take(50);  // waits: 130 > 100
    taken = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(taken.load());
  b.Give(80);
  t.join();
  EXPECT_TRUE(taken.load());
  EXPECT_EQ(b.held(), 50);
}

// Take(n, interrupted): bytes that fit are taken without asking; else the
// check is asked before each wait, and a yes takes nothing; bytes given
// back meanwhile end the wait with the bytes taken.
TEST(ByteBudget, AnInterruptedTakeTakesNothing) {
  ByteBudget b(100);
  int asked = 0;
  const std::function<bool()> no = [&asked] {
    ++asked;
    return false;
  };
  EXPECT_TRUE(b.Take(80, no));
  EXPECT_EQ(asked, 0) << "bytes that fit are taken without asking";
  const std::function<bool()> third_time = [&asked] { return ++asked >= 3; };
  EXPECT_FALSE(b.Take(50, third_time));
  EXPECT_EQ(asked, 3);
  EXPECT_EQ(b.held(), 80) << "an interrupted Take took bytes";

  std::atomic<bool> taken{false};
  std::thread t([&] {
    taken = b.Take(50, no);  // waits: 130 > 100, until the bytes below are given back
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  EXPECT_FALSE(taken.load());
  b.Give(80);
  t.join();
  EXPECT_TRUE(taken.load());
  EXPECT_EQ(b.held(), 50);
}

}  // namespace
}  // namespace cqlstream::store
