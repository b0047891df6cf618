// Copyright (c) cqlstream authors.
#include "net/policies.h"

#include <gtest/gtest.h>

#include <set>

#include "cqlstream/errors.h"

namespace cqlstream::net {
namespace {

Status Server(ServerErrorCode code, int received = 0, int blockfor = 1, bool data_present = false) {
  auto e = std::make_shared<ServerError>();
  e->code = static_cast<int32_t>(code);
  e->alive = received;
  e->required = blockfor;
  e->data_present = data_present;
  e->message = "x";
  return Status::FromServer(e);
}

TEST(RetryPolicyTest, TransientErrorsGoToTheNextHostWithBackoff) {
  DefaultRetryPolicy p;
  auto s = p.NewSession();
  auto d = s->OnError(Status::Timeout("t"), /*idempotent=*/true, 1);
  EXPECT_EQ(d.kind, RetryDecision::Kind::kNextHost);
  EXPECT_LE(d.delay.count(), p.options().max_delay.count());
  EXPECT_EQ(s->OnError(Server(ServerErrorCode::kUnavailable), false, 2).kind, RetryDecision::Kind::kNextHost);
  EXPECT_EQ(s->OnError(Server(ServerErrorCode::kOverloaded), false, 3).kind, RetryDecision::Kind::kNextHost);
  // Overloaded has its own budget: the third other failure is still retried.
  EXPECT_EQ(s->OnError(Status::Timeout("t"), true, 4).kind, RetryDecision::Kind::kNextHost);
  // Out of retries.
  EXPECT_EQ(s->OnError(Status::Timeout("t"), true, 5).kind, RetryDecision::Kind::kGiveUp);
}

// Issue 9: a node at its in-flight limit answers Overloaded; the client backs
// off exponentially with jitter, bounded in count, so the node sees the load drop.
TEST(RetryPolicyTest, OverloadedBacksOffExponentiallyWithJitterAndABound) {
  DefaultRetryPolicy::Options o;
  o.max_overload_retries = 6;
  o.overload_base_delay = std::chrono::milliseconds(40);
  o.overload_max_delay = std::chrono::milliseconds(500);
  DefaultRetryPolicy p(o);
  std::set<int64_t> distinct_first;
  for (int trial = 0; trial < 20; ++trial) {
    auto s = p.NewSession();
    for (int n = 1; n <= 6; ++n) {
      auto d = s->OnError(Server(ServerErrorCode::kOverloaded), /*idempotent=*/false, n);
      ASSERT_EQ(d.kind, RetryDecision::Kind::kNextHost) << n;
      const int64_t full = std::min<int64_t>(40LL << (n - 1), 500);
      EXPECT_GE(d.delay.count(), full / 2) << n;
      EXPECT_LE(d.delay.count(), full) << n;
      if (n == 1) distinct_first.insert(d.delay.count());
    }
    EXPECT_EQ(s->OnError(Server(ServerErrorCode::kOverloaded), false, 7).kind, RetryDecision::Kind::kGiveUp);
  }
  EXPECT_GT(distinct_first.size(), 1u);  // jittered
}

// The one backoff of retries and reconnection (pools and control connection
// had their own copies; the control connection's had no jitter).
TEST(ExponentialBackoffTest, DoublesUpToTheCapWithJitter) {
  ExponentialBackoff b(std::chrono::milliseconds(100), std::chrono::milliseconds(1000));
  EXPECT_EQ(b.Ceiling(1).count(), 100);
  EXPECT_EQ(b.Ceiling(2).count(), 200);
  EXPECT_EQ(b.Ceiling(4).count(), 800);
  EXPECT_EQ(b.Ceiling(5).count(), 1000);
  EXPECT_EQ(b.Ceiling(1000).count(), 1000);  // no overflow
  EXPECT_EQ(b.Ceiling(0).count(), 100);
  std::set<int64_t> seen;
  for (int i = 0; i < 50; ++i) {
    const int64_t d = b.Delay(3).count();
    EXPECT_GE(d, 200);
    EXPECT_LE(d, 400);
    seen.insert(d);
  }
  EXPECT_GT(seen.size(), 5u);
}

TEST(RetryPolicyTest, NonIdempotentRequestsAreNotRetriedWhenTheyMayHaveHappened) {
  DefaultRetryPolicy p;
  auto s = p.NewSession();
  EXPECT_EQ(s->OnError(Status::Timeout("t"), false, 1).kind, RetryDecision::Kind::kGiveUp);
  EXPECT_EQ(s->OnError(Status::ConnectionLost("c"), false, 1).kind, RetryDecision::Kind::kGiveUp);
  EXPECT_EQ(s->OnError(Server(ServerErrorCode::kWriteTimeout), false, 1).kind, RetryDecision::Kind::kGiveUp);
  // Nothing was sent: always safe.
  EXPECT_EQ(s->OnError(Status::ConnectFailed("c"), false, 1).kind, RetryDecision::Kind::kNextHost);
}

TEST(RetryPolicyTest, ReadTimeoutWithEnoughReplicasRetriesTheSameHostOnce) {
  DefaultRetryPolicy p;
  auto s = p.NewSession();
  EXPECT_EQ(s->OnError(Server(ServerErrorCode::kReadTimeout, 1, 1, false), true, 1).kind,
            RetryDecision::Kind::kSameHost);
  EXPECT_EQ(s->OnError(Server(ServerErrorCode::kReadTimeout, 1, 1, false), true, 2).kind,
            RetryDecision::Kind::kNextHost);
}

TEST(RetryPolicyTest, PermanentErrorsAreNotRetried) {
  DefaultRetryPolicy p;
  for (auto code : {ServerErrorCode::kSyntaxError, ServerErrorCode::kInvalid, ServerErrorCode::kUnauthorized,
                    ServerErrorCode::kAlreadyExists, ServerErrorCode::kConfigError}) {
    EXPECT_EQ(p.NewSession()->OnError(Server(code), true, 1).kind, RetryDecision::Kind::kGiveUp);
  }
  EXPECT_FALSE(IsTransient(Status::InvalidArgument("x")));
  EXPECT_TRUE(IsTransient(Status::ConnectionLost("x")));
  EXPECT_EQ(NoRetryPolicy().NewSession()->OnError(Status::Timeout("t"), true, 1).kind,
            RetryDecision::Kind::kGiveUp);
}

TEST(LatencyTrackerTest, PercentilesAndDecay) {
  LatencyTracker t;
  EXPECT_FALSE(t.Percentile(99).has_value());
  for (int i = 0; i < 990; ++i) t.Record(std::chrono::microseconds(1000));
  for (int i = 0; i < 10; ++i) t.Record(std::chrono::microseconds(100000));
  auto p50 = t.Percentile(50);
  ASSERT_TRUE(p50.has_value());
  EXPECT_GE(p50->count(), 1000);
  EXPECT_LE(p50->count(), 1130);  // bucket resolution ~12%
  auto p999 = t.Percentile(99.9);
  EXPECT_GE(p999->count(), 100000);
  t.Decay();
  EXPECT_EQ(t.count(), 495u + 5u);
}

TEST(SpeculativePolicyTest, AdaptiveDelayFollowsTheP99) {
  LatencyTracker t;
  PercentileSpeculativePolicy p;
  EXPECT_FALSE(p.NextDelay(1, t).has_value()) << "no hedging before there are statistics";
  for (int i = 0; i < 1000; ++i) t.Record(std::chrono::microseconds(i < 985 ? 2000 : 50000));
  auto d = p.NextDelay(1, t);
  ASSERT_TRUE(d.has_value());
  EXPECT_GE(d->count(), 2000);
  EXPECT_LE(d->count(), 60000);
  EXPECT_FALSE(p.NextDelay(2, t).has_value()) << "at most two executions";
  ConstantSpeculativePolicy c(std::chrono::microseconds(500), 3);
  EXPECT_EQ(c.NextDelay(2, t)->count(), 500);
  EXPECT_FALSE(c.NextDelay(3, t).has_value());
}

}  // namespace
}  // namespace cqlstream::net
