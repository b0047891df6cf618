// Copyright (c) cqlstream authors.
#include "loader/hedge_budget.h"

#include <gtest/gtest.h>

namespace cqlstream::loader {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// Completes `n` samples, every `every`-th of them hedged; hedges win when
// `wins` says so. Returns the hedges the budget allowed meanwhile (one try
// per completion, never at the window).
int Complete(HedgeBudget& b, int n, int every, bool wins) {
  int taken = 0;
  for (int i = 0; i < n; ++i) {
    const bool hedged = every > 0 && i % every == 0;
    b.OnComplete(milliseconds(10), hedged, hedged && wins);
    if (b.TryTake(0, 100, milliseconds(50), milliseconds(20))) ++taken;
  }
  return taken;
}

TEST(HedgeBudgetTest, WinningHedgesKeepAboutFivePercent) {
  HedgeBudget b;
  const int taken = Complete(b, 20000, 20, true);
  EXPECT_DOUBLE_EQ(b.win_rate(), 1.0);
  // 5% of 20,000 plus the initial tokens.
  EXPECT_GE(taken, 990);
  EXPECT_LE(taken, 1010);
}

TEST(HedgeBudgetTest, RareWinsMakeHedgingRareButNotZero) {
  HedgeBudget b;
  Complete(b, 20000, 20, false);  // 1,000 hedges resolved, none won
  EXPECT_DOUBLE_EQ(b.win_rate(), 0.0);
  while (b.TryTake(0, 100, milliseconds(50), milliseconds(20))) {
  }
  // The floor: 1% of 5% = 1 hedge per 2,000 samples.
  const int taken = Complete(b, 100000, 0, false);
  EXPECT_GE(taken, 45);
  EXPECT_LE(taken, 55);
}

TEST(HedgeBudgetTest, WinRateIsOverTheLastHedgesOnly) {
  HedgeBudget b;
  for (int i = 0; i < 1000; ++i) b.OnComplete(milliseconds(10), true, false);
  EXPECT_DOUBLE_EQ(b.win_rate(), 0.0);
  for (int i = 0; i < HedgeBudget::kHistory / 2; ++i) b.OnComplete(milliseconds(10), true, true);
  EXPECT_DOUBLE_EQ(b.win_rate(), 0.5);
  for (int i = 0; i < HedgeBudget::kHistory; ++i) b.OnComplete(milliseconds(10), true, true);
  EXPECT_DOUBLE_EQ(b.win_rate(), 1.0);
}

TEST(HedgeBudgetTest, TooFewHedgesCountAsWinning) {
  HedgeBudget b;
  for (int i = 0; i < HedgeBudget::kMinHistory - 1; ++i) b.OnComplete(milliseconds(10), true, false);
  EXPECT_DOUBLE_EQ(b.win_rate(), 1.0);
  b.OnComplete(milliseconds(10), true, false);
  EXPECT_DOUBLE_EQ(b.win_rate(), 0.0);
}

TEST(HedgeBudgetTest, RefillScalesBetweenRareAndGoodWinRates) {
  // 10% wins: a third of the way from 5% to 20% -> 0.01 + 0.99 / 3 of the rate.
  HedgeBudget b;
  for (int i = 0; i < HedgeBudget::kHistory; ++i) b.OnComplete(milliseconds(10), true, i % 10 == 0);
  ASSERT_NEAR(b.win_rate(), 0.10, 1e-9);
  while (b.TryTake(0, 100, milliseconds(50), milliseconds(20))) {
  }
  const double before = b.tokens();
  for (int i = 0; i < 1000; ++i) b.OnComplete(milliseconds(10), false, false);
  const double scale = HedgeBudget::kFloorScale + (1 - HedgeBudget::kFloorScale) / 3.0;
  EXPECT_NEAR(b.tokens() - before, 1000 * HedgeBudget::kTokensPerCompletion * scale, 1e-6);
}

TEST(HedgeBudgetTest, TokensAreCapped) {
  HedgeBudget b;
  for (int i = 0; i < 100000; ++i) b.OnComplete(milliseconds(10), false, false);
  EXPECT_DOUBLE_EQ(b.tokens(), HedgeBudget::kMaxTokens);
}

TEST(HedgeBudgetTest, NoHedgeBeforeItCouldBeFaster) {
  HedgeBudget b;
  b.OnComplete(milliseconds(200), false, false);
  b.OnComplete(milliseconds(201), false, false);
  EXPECT_EQ(b.min_latency(), milliseconds(200));
  // p99 of 250 ms at a 200 ms path: a hedge sent at 250 ms could not arrive
  // before 450 ms; wait for min latency + RTT = 400 ms at least.
  EXPECT_EQ(b.Delay(milliseconds(250), milliseconds(200)), milliseconds(400));
  // A long tail: the p99 decides.
  EXPECT_EQ(b.Delay(milliseconds(900), milliseconds(200)), milliseconds(900));
  // Never below 2 ms.
  HedgeBudget fresh;
  EXPECT_EQ(fresh.Delay(microseconds(100), microseconds(0)), milliseconds(2));
}

TEST(HedgeBudgetTest, NoHedgeAtTheWindowUnlessTheAttemptIsStuck) {
  HedgeBudget b;
  const auto delay = milliseconds(20);
  EXPECT_FALSE(b.TryTake(100, 100, milliseconds(25), delay));  // would queue
  EXPECT_FALSE(b.TryTake(120, 100, milliseconds(79), delay));
  const double before = b.tokens();
  EXPECT_TRUE(b.TryTake(100, 100, milliseconds(80), delay));  // 4x the delay: stuck
  EXPECT_DOUBLE_EQ(b.tokens(), before - 1);
  EXPECT_TRUE(b.TryTake(99, 100, milliseconds(25), delay));  // below the window
}

TEST(HedgeBudgetTest, AnEmptyBudgetRefuses) {
  HedgeBudget b;
  int taken = 0;
  while (b.TryTake(0, 100, milliseconds(50), milliseconds(20))) ++taken;
  EXPECT_EQ(taken, static_cast<int>(HedgeBudget::kInitialTokens));
  EXPECT_FALSE(b.TryTake(0, 100, milliseconds(500), milliseconds(20)));
}

}  // namespace
}  // namespace cqlstream::loader
