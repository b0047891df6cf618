// Copyright (c) cqlstream authors.
#include "loader/congestion_gate.h"

#include <gtest/gtest.h>

namespace cqlstream::loader {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Twenty requests sent together (or one coalesced request's samples) that
// all time out are one congestion event: one cut, not twenty.
TEST(CongestionGateTest, RequestsSentBeforeTheLastCutDoNotCutAgain) {
  CongestionGate g;
  const auto t0 = Clock::now();
  int cuts = 0;
  for (int i = 0; i < 20; ++i) {
    cuts += g.Admit(Status::Timeout("t"), t0 + milliseconds(i), t0 + milliseconds(500 + i)) ? 1 : 0;
  }
  EXPECT_EQ(cuts, 1);
  // A request sent after the cut that fails too is new evidence.
  EXPECT_TRUE(g.Admit(Status::Overloaded("o"), t0 + milliseconds(600), t0 + milliseconds(900)));
  EXPECT_FALSE(g.Admit(Status::Timeout("t"), t0 + milliseconds(700), t0 + milliseconds(950)));
}

TEST(CongestionGateTest, OnlyTimeoutsAndOverloadAreCongestion) {
  CongestionGate g;
  const auto t0 = Clock::now();
  EXPECT_FALSE(g.Admit(Status::ConnectionLost("c"), t0, t0));
  EXPECT_FALSE(g.Admit(Status::NotFound("n"), t0, t0));
  EXPECT_TRUE(g.Admit(Status::Timeout("t"), t0, t0));
}

}  // namespace
}  // namespace cqlstream::loader
