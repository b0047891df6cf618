// Copyright (c) cqlstream authors.
//
// PumpWait: 2 ms on short paths, a twentieth of the latency on long ones
// up to 10 ms, never past a queued retry's due time.
#include "loader/pump_tick.h"

#include <gtest/gtest.h>

namespace cqlstream::loader {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

TEST(PumpWaitTest, FollowsTheLatencyBetweenTwoAndTenMilliseconds) {
  const auto now = Clock::now();
  EXPECT_EQ(PumpWait(microseconds(0), std::nullopt, now), milliseconds(2));  // nothing measured yet
  EXPECT_EQ(PumpWait(milliseconds(1), std::nullopt, now), milliseconds(2));
  EXPECT_EQ(PumpWait(milliseconds(40), std::nullopt, now), milliseconds(2));
  EXPECT_EQ(PumpWait(milliseconds(100), std::nullopt, now), milliseconds(5));
  EXPECT_EQ(PumpWait(milliseconds(200), std::nullopt, now), milliseconds(10));
  EXPECT_EQ(PumpWait(milliseconds(2000), std::nullopt, now), milliseconds(10));
}

TEST(PumpWaitTest, EndsAtAQueuedRetrysDueTime) {
  const auto now = Clock::now();
  EXPECT_EQ(PumpWait(milliseconds(200), now + milliseconds(3), now), milliseconds(3));
  EXPECT_EQ(PumpWait(milliseconds(200), now + milliseconds(30), now), milliseconds(10));
  EXPECT_EQ(PumpWait(milliseconds(1), now + microseconds(500), now), microseconds(500));
  // Already due: no wait.
  EXPECT_EQ(PumpWait(milliseconds(200), now - milliseconds(1), now), Clock::duration::zero());
}

}  // namespace
}  // namespace cqlstream::loader
