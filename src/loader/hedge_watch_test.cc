// Copyright (c) cqlstream authors.
#include "loader/hedge_watch.h"

#include <gtest/gtest.h>

#include <vector>

namespace cqlstream::loader {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

struct Harness {
  HedgeWatch<int> watch;
  HedgeBudget budget;
  std::vector<int> live = std::vector<int>(16, 1);  // by task: still to hedge
  std::vector<int> sent;

  void Poll(Clock::time_point now, microseconds delay, int64_t in_flight, int64_t window) {
    watch.Poll(now, delay, budget, in_flight, window, [&](int t, int) { return live[t] != 0; },
               [&](int t) { sent.push_back(t); });
  }
};

// At the window an attempt past the hedge delay is not hedged (the hedge
// would only queue), but it is kept: once it has waited kStuckFactor x the
// delay it is stuck, and gets its hedge although the window is still full.
// (Before, the attempt was dropped at its first look and never hedged.)
TEST(HedgeWatchTest, AnAttemptRefusedAtTheWindowIsHedgedOnceStuck) {
  Harness h;
  const auto t0 = Clock::now();
  const microseconds delay = milliseconds(10);
  h.watch.Add({t0, 1, 0});
  h.watch.Add({t0 + milliseconds(1), 2, 0});
  h.Poll(t0 + milliseconds(5), delay, 64, 64);  // not due
  EXPECT_TRUE(h.sent.empty());
  EXPECT_EQ(h.watch.deferred(), 0u);
  h.Poll(t0 + milliseconds(12), delay, 64, 64);  // due, refused at the window
  EXPECT_TRUE(h.sent.empty());
  EXPECT_EQ(h.watch.deferred(), 2u);
  h.Poll(t0 + milliseconds(39), delay, 64, 64);  // not stuck yet
  EXPECT_TRUE(h.sent.empty());
  h.Poll(t0 + milliseconds(40), delay, 64, 64);  // 1 is stuck
  EXPECT_EQ(h.sent, std::vector<int>{1});
  h.live[2] = 0;  // 2 delivered meanwhile: never hedged, dropped
  h.Poll(t0 + milliseconds(100), delay, 64, 64);
  EXPECT_EQ(h.sent, std::vector<int>{1});
  EXPECT_TRUE(h.watch.empty());
}

TEST(HedgeWatchTest, BelowTheWindowADueAttemptIsHedgedAtOnce) {
  Harness h;
  const auto t0 = Clock::now();
  h.watch.Add({t0, 3, 0});
  h.watch.Add({t0 + milliseconds(8), 4, 0});
  h.Poll(t0 + milliseconds(10), milliseconds(10), 10, 64);
  EXPECT_EQ(h.sent, std::vector<int>{3});
  EXPECT_EQ(h.watch.size(), 1u);  // 4 is not due yet
  EXPECT_EQ(h.watch.deferred(), 0u);
}

TEST(HedgeWatchTest, WithoutTokensNothingIsKept) {
  Harness h;
  const auto t0 = Clock::now();
  for (int i = 0; i < 12; ++i) h.watch.Add({t0, i, 0});
  h.Poll(t0 + milliseconds(50), milliseconds(10), 0, 64);
  // The initial tokens (10) pay for the first ten; the rest are dropped.
  EXPECT_EQ(h.sent.size(), static_cast<size_t>(HedgeBudget::kInitialTokens));
  EXPECT_TRUE(h.watch.empty());
}

TEST(HedgeWatchTest, PruneDropsDeadEntriesAtTheFront) {
  Harness h;
  const auto t0 = Clock::now();
  h.watch.Add({t0, 5, 0});
  h.watch.Add({t0, 6, 0});
  h.watch.Add({t0, 7, 0});
  h.live[5] = 0;
  h.live[7] = 0;
  h.watch.Prune([&](int t, int) { return h.live[t] != 0; });
  EXPECT_EQ(h.watch.size(), 2u);  // 7 waits behind the live 6
}

TEST(HedgeBudgetVerdictTest, SaysWhyAHedgeIsNotSent) {
  HedgeBudget b;
  EXPECT_EQ(b.Decide(64, 64, milliseconds(10), milliseconds(10)), HedgeBudget::Verdict::kDefer);
  EXPECT_EQ(b.Decide(64, 64, milliseconds(40), milliseconds(10)), HedgeBudget::Verdict::kSend);
  while (b.Decide(0, 64, milliseconds(10), milliseconds(10)) == HedgeBudget::Verdict::kSend) {
  }
  EXPECT_EQ(b.Decide(0, 64, milliseconds(10), milliseconds(10)), HedgeBudget::Verdict::kDrop);
  EXPECT_EQ(b.Decide(64, 64, milliseconds(10), milliseconds(10)), HedgeBudget::Verdict::kDrop);
}

}  // namespace
}  // namespace cqlstream::loader
