// Copyright (c) cqlstream authors.
//
// WindowController: start-up (slow start, the delay signal, connections
// ahead of the window) and the connection count (growth, limits, giving
// back). Steady state's probes: window_steady_test.cc.
#include "loader/window.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "loader/window_model_test_util.h"

namespace cqlstream::loader {
namespace {

using window_model::Clock;
using window_model::Pipe;
using window_model::Simulate;
using window_model::PathRun;
using window_model::SimulatePath;

TEST(WindowControllerTest, SlowStartReaches90PercentWithinTargets) {
  // The targets: >= 90% of steady state within 1 s at 10 ms and
  // within 3 s at 200 ms (4 MiB per connection, a node serving 800 MB/s,
  // 110 kB images; two connections to start with, where the loader asks
  // for 7 before its first request: InitialConnections). At 200 ms the model
  // holds it to 2.2 s, which the 1.5x rule alone (2.3 s) fails.
  // The model's assumptions, which the 200 ms result (1.8 s) rests on: a
  // connection takes requests 2 round trips after it is asked for (TCP,
  // then OPTIONS and STARTUP sent together) and then carries its full
  // 4 MiB window at once (no TCP slow start of its own); the node serves
  // FIFO at a fixed rate; no open is refused. With connections for 1.5x
  // the window the time was set by the connections (the open ones grew
  // about 1.5x per round trip while the window could double): 2.3 s, at
  // most 167 connections. For 4x the window on round trips of 20 ms and
  // more (kConnectionLookAhead) it is 1.9 s (1.8 s with kStartupDelayCap),
  // with 256 connections at the peak — as many as start-up opened on the real 200 ms path with 1.5x
  // (218-256), and the fewer-connections probes give back what does not
  // pay (ConnectionsBeyondWhatThePathNeedsAreGivenBack).
  struct Case {
    double rtt, limit_s;
  };
  for (Case k : {Case{0.01, 1.0}, Case{0.2, 2.2}}) {
    const double node = 800e6, size = 110e3;
    PathRun r = SimulatePath(k.rtt, node, 4 * 1048576.0, 30, size);
    const double bdp = node * (k.rtt + size / node) / size;  // requests
    SCOPED_TRACE(testing::Message() << "rtt " << k.rtt << " steady " << r.steady / 1e6 << " MB/s, max window "
                                    << r.max_window << " (start-up " << r.max_startup_window << ", BDP " << bdp
                                    << "), max connections " << r.max_connections << ", time to 90% "
                                    << r.TimeTo90() << " s");
    std::printf("rtt %.0f ms: time to 90%% %.1f s, window max %d (start-up %d), connections max %d\n", k.rtt * 1e3,
                r.TimeTo90(), r.max_window, r.max_startup_window, r.max_connections);
    EXPECT_GE(r.steady, 0.9 * node);
    EXPECT_LE(r.TimeTo90(), k.limit_s);
    // Start-up stops growing once requests queue: the window stays within
    // 2.5 bandwidth-delay products (1.4 at 200 ms, 2.2 at 10 ms; 3.2 and
    // 3.3 before the delay signal, up against the 3-BDP cap), and the
    // node's queue stays bounded; steady-state probing stays near it too.
    // (The controller's BDP uses the lowest interval-mean latency, which
    // includes the first burst's wait at the node: up to 10% above the bare
    // round trip here.)
    EXPECT_LE(r.max_startup_window, std::max(64.0, 2.5 * bdp));
    // At 200 ms a queue of a quarter round trip (50 ms) let the window
    // peak at 2.1 bandwidth-delay products (3,014 requests); the signal
    // capped at 16 ms above the lowest latency (kStartupDelayCap) stops it
    // at 1.4 (1,996).
    if (k.rtt >= 0.1) {
      EXPECT_LE(r.max_startup_window, 1.6 * bdp);
    }
    EXPECT_LE(r.max_node_queue_s, 2.3 * (k.rtt + size / node));
    EXPECT_LE(r.max_window, 4 * bdp + 64);
    EXPECT_LE(r.max_connections, WindowController::kDefaultMaxConnections);
  }
}

TEST(WindowControllerTest, AStartUpCutShortStillReachesFullSpeedSoon) {
  // A timeout early in start-up (a stall of the path or the node) ends it
  // at a fraction of the path's bandwidth-delay product, with few
  // connections. Steady-state probing alone (x1.25 a probe, a probe every
  // few round trips) did not fill the path in 40 s from there at 200 ms
  // (the last 20 s carried 67, 165 and 288 MB/s of 800); a probe that pays
  // a start-up round trip's gain resumes start-up (5.5 s to 90% here).
  const double node = 800e6, size = 110e3, bdp = node * (0.2 + size / node) / size;
  for (double at : {0.4, 0.8, 1.2}) {
    PathRun r = SimulatePath(0.2, node, 4 * 1048576.0, 40, size, {}, 0, {at});
    std::printf("timeout at %.1f s: time to 90%% %.1f s, steady %.0f MB/s, window max %d (start-up %d), "
                "connections %d, resumed %d\n",
                at, r.TimeTo90(), r.steady / 1e6, r.max_window, r.max_startup_window, r.final_connections,
                r.startup_resumes);
    EXPECT_GE(r.steady, 0.9 * node) << "timeout at " << at;
    EXPECT_LE(r.TimeTo90(), 6.5) << "timeout at " << at;
    EXPECT_EQ(r.startup_resumes, 1) << "timeout at " << at;
    // As bounded as a start-up that nothing cut short (SlowStartReaches90PercentWithinTargets).
    EXPECT_LE(r.max_startup_window, 2.6 * bdp) << "timeout at " << at;
    EXPECT_LE(r.max_node_queue_s, 2.3 * (0.2 + size / node)) << "timeout at " << at;
    EXPECT_LE(r.max_connections, WindowController::kDefaultMaxConnections) << "timeout at " << at;
  }
}

TEST(WindowControllerTest, ConnectionsBeyondWhatThePathNeedsAreGivenBack) {
  // Start-up asks for connections ahead of need (one per 2 MiB of 4x the
  // window at 100 and 200 ms: 256 at 200 ms and 248 at 100 ms in the
  // model; on the real path 256 at 200 ms already with 1.5x, where 4 MiB
  // per connection and round trip needs about 40-50). Start-up's end and
  // then steady state give back those that do not pay, and keep the speed
  // (here 256 -> 48 at 200 ms where the path needs 39, 248 -> 32 at 100 ms;
  // with the probes' floor at 2 MiB per connection, before 2026-12-07,
  // 91 and 49). With 1 MiB TCP windows (a host tuned down) the path needs
  // four times the probes' floor of 4 MiB each: a probe below what it
  // needs loses and is undone.
  struct Case {
    double rtt, conn_window;
  };
  const double node = 800e6, size = 110e3;
  for (Case k : {Case{0.2, 4 * 1048576.0}, Case{0.1, 4 * 1048576.0}, Case{0.2, 1048576.0}, Case{0.1, 1048576.0},
                 Case{0.05, 1048576.0}}) {
    PathRun r = SimulatePath(k.rtt, node, k.conn_window, 40, size);
    const int needed = static_cast<int>(std::ceil(node * k.rtt / k.conn_window));
    std::printf("rtt %.0f ms, %.0f MiB per connection: steady %.0f MB/s, connections max %d, final %d (the path "
                "needs %d)\n",
                k.rtt * 1e3, k.conn_window / 1048576.0, r.steady / 1e6, r.max_connections, r.final_connections, needed);
    SCOPED_TRACE(testing::Message() << "rtt " << k.rtt << " conn_window " << k.conn_window << " mean connections "
                                    << r.mean_connections_late);
    // A probe below what the path needs costs while it is measured (at
    // 200 ms, 2-3 s at three quarters of the speed).
    EXPECT_GE(r.steady, (k.conn_window >= 4 * 1048576.0 ? 0.95 : 0.93) * node);
    // Not left below what the path needs (a probe that goes below loses
    // and is undone; 3% less is within what a probe may keep).
    EXPECT_GE(r.mean_connections_late, 0.97 * needed);
    if (k.conn_window >= 4 * 1048576.0) {
      // The probes give back more than start-up's end did.
      EXPECT_LT(r.final_connections, 0.75 * r.connections_at_startup_end);
      // Down to about what the path's windows need (the probes' floor is
      // one per 4 MiB on the wire), or kKeptConnections.
      EXPECT_LE(r.min_connections_late, std::max(WindowController::kKeptConnections, needed * 3 / 2));
      // A larger-window probe from there asks for x1.25 the connections
      // (rounded up), not for start-up's one per 2 MiB of its bytes (48 ->
      // 121 at 200 ms). Such probes run in the last half; no other rise
      // does here (a more-connections probe, +50%, needs requests waiting
      // twice the lowest latency; an undone fewer-connections probe goes
      // back up to x1.5), and the bound would catch those too.
      EXPECT_GT(r.max_connection_rise_late, 1.0);
      EXPECT_LE(r.max_connection_rise_late, 1.3);
    }
  }
}

TEST(WindowControllerTest, StartUpsEndGivesBackTheLookAheadsSurplusAtOnce) {
  // On long round trips start-up asks for the connections of 4x its window
  // (256 at 200 ms and 248 at 100 ms in the model). When it ends no more
  // doublings come: all beyond one connection per 1 MiB of the settled
  // window's bytes go back at once (before: all stayed until
  // fewer-connections probes took them x2/3 a probe at a time), and the
  // speed is kept. Not where the session cannot give connections back.
  const double node = 800e6, size = 110e3, conn_window = 4 * 1048576.0;
  for (double rtt : {0.1, 0.2}) {
    PathRun r = SimulatePath(rtt, node, conn_window, 20, size);
    SCOPED_TRACE(testing::Message() << "rtt " << rtt);
    ASSERT_GT(r.connections_at_startup_end, 0);
    const int settled = static_cast<int>(std::ceil(WindowController::kSettledConnectionFactor *
                                                   r.window_at_startup_end * size /
                                                   WindowController::kBytesPerConnection));
    std::printf("rtt %.0f ms: connections max %d, when start-up ended %d (window %d), steady %.0f MB/s\n", rtt * 1e3,
                r.max_connections, r.connections_at_startup_end, r.window_at_startup_end, r.steady / 1e6);
    // The model's figures: 248 -> 97 at 100 ms, 256 -> 192 at 200 ms
    // (at 200 ms the settled window is ~1,800 requests: still ~5x the 39
    // connections 4 MiB windows need; the probes give back the rest).
    EXPECT_LE(r.connections_at_startup_end, (rtt < 0.15 ? 0.5 : 0.8) * r.max_connections);
    EXPECT_LE(r.connections_at_startup_end, std::max(settled, WindowController::kKeptConnections));
    EXPECT_GE(r.steady, 0.95 * node);
  }
  PathRun fixed = SimulatePath(0.2, node, conn_window, 20, size, {}, 0, {}, /*shrink=*/false);
  ASSERT_GT(fixed.connections_at_startup_end, 0);
  EXPECT_EQ(fixed.connections_at_startup_end, fixed.max_connections);
}

TEST(WindowControllerTest, ANodeThatKeepsSheddingLoadIsNotPushedIntoItAgainAndAgain) {
  // Overload answers every 2 s, from the first second on (a node that sheds
  // load): start-up may resume once after the first, and a resumed
  // start-up that meets congestion again ends the resuming.
  std::vector<double> every_2s;
  for (double t = 1.0; t < 40; t += 2) every_2s.push_back(t);
  for (double rtt : {0.01, 0.2}) {
    PathRun r = SimulatePath(rtt, 800e6, 4 * 1048576.0, 40, 110e3, {}, 0, every_2s);
    std::printf("rtt %.0f ms, overload every 2 s: steady %.0f MB/s, resumed %d, connections %d\n", rtt * 1e3,
                r.steady / 1e6, r.startup_resumes, r.final_connections);
    EXPECT_LE(r.startup_resumes, 1) << "rtt " << rtt;
  }
}

// Drives one start-up round trip: `n` completions of `bytes` after
// `latency`, then a tick `round` later.
void Round(WindowController* c, Clock::time_point* now, int n, std::chrono::milliseconds latency,
           std::chrono::milliseconds round = std::chrono::milliseconds(200), int64_t bytes = 100000) {
  for (int i = 0; i < n; ++i) c->OnComplete(bytes, latency);
  *now += round;
  c->Tick(*now);
}

// A controller in start-up after one round trip of 200 ms that delivered
// its whole window of 100: the window doubled to 200.
WindowController AfterOnePayingRound(Clock::time_point* now, WindowController::Options o = {}) {
  o.initial_window = 100;
  WindowController c(o, *now);
  Round(&c, now, 100, std::chrono::milliseconds(200));
  return c;
}

TEST(WindowControllerTest, StartupStopsGrowingWhileRequestsQueue) {
  using std::chrono::milliseconds;
  auto now = Clock::now();
  WindowController c = AfterOnePayingRound(&now);
  ASSERT_EQ(c.phase(), WindowController::Phase::kStartup);
  ASSERT_EQ(c.window(), 200);
  // Answers now wait twice the round trip: once the smoothed latency is
  // past 1.25x the lowest, at most 16 ms above it (216 ms: from the first
  // answer), the window holds.
  const int before = c.window();
  for (int i = 0; i < 150; ++i) c.OnComplete(100000, milliseconds(400));
  EXPECT_LE(c.window(), before + 3);
  // The queue drains: answers come at the round trip again, and the
  // window grows on.
  for (int i = 0; i < 150; ++i) c.OnComplete(100000, milliseconds(200));
  EXPECT_GE(c.window(), before + 100);
  EXPECT_EQ(c.phase(), WindowController::Phase::kStartup);
}

TEST(WindowControllerTest, FlatRoundTripsWithoutQueueingKeepTheWindowGrowingThenEndStartup) {
  using std::chrono::milliseconds;
  auto now = Clock::now();
  WindowController c = AfterOnePayingRound(&now);
  ASSERT_EQ(c.window(), 200);
  // About the same goodput again (+10%), at the lowest latency: the
  // answers to what the window added are still on their way. The window
  // is not paused (it is below its cap, 3 x 110 requests)...
  Round(&c, &now, 110, milliseconds(200));
  EXPECT_EQ(c.phase(), WindowController::Phase::kStartup);
  const int w = c.window();
  ASSERT_LT(w, 330);
  for (int i = 0; i < 10; ++i) c.OnComplete(100000, milliseconds(200));
  EXPECT_GT(c.window(), w);
  // ...and three such round trips in a row end start-up (goodput 50 MB/s
  // x 200 ms = 100 requests of 100 kB; + 25%).
  Round(&c, &now, 90, milliseconds(200));
  EXPECT_EQ(c.phase(), WindowController::Phase::kStartup);
  Round(&c, &now, 100, milliseconds(200));
  EXPECT_EQ(c.phase(), WindowController::Phase::kSteady);
  EXPECT_EQ(c.window(), 125);
}

TEST(WindowControllerTest, AFlatRoundTripWithoutQueueingThenOneWithQueueingOnlyPauses) {
  using std::chrono::milliseconds;
  auto now = Clock::now();
  WindowController::Options o;
  o.initial_connections = o.max_connections = 2;  // no connections to wait for
  WindowController c = AfterOnePayingRound(&now, o);
  Round(&c, &now, 100, milliseconds(200));  // flat, no queueing
  // Flat with queueing (answers at 1.5x the lowest latency): the first of
  // its kind pauses, whatever came before (before the kinds were counted
  // apart, the two together ended start-up here)...
  Round(&c, &now, 150, milliseconds(300), milliseconds(300));
  EXPECT_EQ(c.phase(), WindowController::Phase::kStartup);
  // ...the second in a row ends it.
  Round(&c, &now, 150, milliseconds(300), milliseconds(300));
  EXPECT_EQ(c.phase(), WindowController::Phase::kSteady);
}

TEST(WindowControllerTest, AColdNodeDoesNotSettleTheWindowBelowTheFloor) {
  // A traced run straight to a node (RTT 0) whose first answers were slow
  // (its caches cold): start-up's first intervals delivered 67, 158 and 159
  // MB/s at mean latencies of 5.5, 12.9 and 17.1 ms, heavy queueing ended
  // start-up within 30 ms, and the bandwidth-delay product of that goodput
  // and the first latency settled the window at 9 requests (1.25 x 7.9).
  // The node then served ~700 MB/s at 2.2 ms, where larger windows gained
  // under the 5% a probe must: the run stayed at windows of 13-30
  // (docs/benchmarks-long-rtt.md, "A window floor straight to the node"). Where the
  // window reached kMinCap requests, start-up settles at no fewer than
  // kMinCap (where it reached fewer, at no fewer than it reached), and
  // smaller-window probes stop there.
  constexpr int kFloor = 64;  // WindowController::kMinCap
  auto now = Clock::now();
  WindowController::Options o;
  o.initial_connections = 7;  // as the loader opens for 110-KB samples: none to wait for
  WindowController c(o, now);
  // An interval lasts at least the smoothed latency.
  auto round = [&](int n, std::chrono::microseconds latency, std::chrono::milliseconds length) {
    for (int i = 0; i < n; ++i) c.OnComplete(110000, latency);
    now += length;
    c.Tick(now);
  };
  using std::chrono::microseconds, std::chrono::milliseconds;
  round(8, microseconds(5500), milliseconds(10));    // 88 MB/s
  round(30, microseconds(12900), milliseconds(20));  // 165 MB/s: paid
  ASSERT_EQ(c.phase(), WindowController::Phase::kStartup);
  const int reached = c.window();
  ASSERT_GE(reached, 32);
  round(30, microseconds(17100), milliseconds(20));  // flat, latency 3x the lowest
  ASSERT_EQ(c.phase(), WindowController::Phase::kSteady);
  std::printf("window reached %d, settled at %s\n", reached, c.Describe().c_str());
  EXPECT_GE(c.window(), std::min(reached, kFloor)) << c.Describe();
  // Steady state at 2.2 ms and ~700 MB/s, measured with noise, whatever
  // the window: no smaller-window probe takes it lower.
  int lowest = c.window();
  for (int i = 0; i < 3000; ++i) {
    const int n = (i % 3 == 0) ? 620 : 640;  // 100-ms intervals of 682-704 MB/s
    for (int k = 0; k < n; ++k) c.OnComplete(110000, microseconds(2200));
    now += milliseconds(100);
    c.Tick(now);
    lowest = std::min(lowest, c.window());
  }
  EXPECT_GE(lowest, std::min(reached, kFloor)) << c.Describe();
}

TEST(WindowControllerTest, AFlatRoundTripWithQueueingPausesTheWindow) {
  using std::chrono::milliseconds;
  auto now = Clock::now();
  WindowController c = AfterOnePayingRound(&now);
  ASSERT_EQ(c.window(), 200);
  // Flat (the same 50 MB/s), with answers at 1.5x the lowest latency (a
  // round trip of 300 ms): paused, not ended (connections asked for a
  // round trip ago may still be opening)...
  Round(&c, &now, 150, milliseconds(300), milliseconds(300));
  EXPECT_EQ(c.phase(), WindowController::Phase::kStartup);
  // ...and a paused window does not grow even when latency falls back,
  // though its caps would let it (3 x 100 requests).
  const int w = c.window();
  ASSERT_LT(w, 290);
  for (int i = 0; i < 50; ++i) c.OnComplete(100000, milliseconds(200));
  EXPECT_EQ(c.window(), w);
}

TEST(WindowControllerTest, ConnectionsGrowPastTheOldCeilingOfThirtyTwo) {
  // 200 ms, 4 MiB per connection, a node serving 1.5 GB/s: 32 connections
  // carry 671 MB/s; the path needs 72.
  const double node = 1.5e9;
  PathRun r = SimulatePath(0.2, node, 4 * 1048576.0, 30);
  SCOPED_TRACE(testing::Message() << "steady " << r.steady / 1e6 << " MB/s, connections " << r.max_connections);
  EXPECT_GE(r.steady, 0.9 * node);
  EXPECT_GT(r.max_connections, 32);
}

TEST(WindowControllerTest, OnLongRoundTripsStartUpAsksForTheConnectionsOfTheWindowTwoDoublingsOn) {
  // One start-up round trip: 32 answers of 110 kB, then the verdict. The
  // window is 64 after it; at 200 ms the connections are for 4x that
  // window (ceil(4 x 64 x 110 kB / 2 MiB) = 14), at 10 ms for 1.5x (6),
  // and for 1.5x where the session cannot give connections back.
  struct Case {
    int rtt_ms, want;
    bool shrink = true;
  };
  for (Case k : {Case{200, 14}, Case{20, 14}, Case{10, 6}, Case{1, 6}, Case{200, 6, false}}) {
    const auto start = Clock::time_point{} + std::chrono::hours(1);
    WindowController c({}, start);
    c.SetConnectionsShrink(k.shrink);
    for (int i = 0; i < 32; ++i) c.OnComplete(110000, std::chrono::milliseconds(k.rtt_ms));
    c.Tick(start + std::chrono::milliseconds(std::max(k.rtt_ms, 10)));
    EXPECT_EQ(c.window(), 64) << k.rtt_ms << " ms";
    EXPECT_EQ(c.connections(), k.want) << k.rtt_ms << " ms";
    EXPECT_EQ(c.phase(), WindowController::Phase::kStartup);
  }
}

TEST(WindowControllerTest, AFewLateAnswersAreNotAQueueOnALongRoundTrip) {
  // 200 ms: a round trip of 32 answers, then a flat one (36 answers in
  // 240 ms) whose last 11 come 30 ms late (a hiccup: the smoothed latency
  // reads 221 ms, above the 216-ms limit, the round trip's mean 209 ms).
  // Its verdict is the lag of the measure, not queueing: start-up goes on
  // asking for the connections its window needs (a verdict on the smoothed
  // latency alone held them, as for a queue). The window is held by the
  // flat round trip's 3-BDP cap either way: the connections show the
  // verdict.
  const auto start = Clock::time_point{} + std::chrono::hours(1);
  WindowController c({}, start);
  for (int i = 0; i < 32; ++i) c.OnComplete(110000, std::chrono::milliseconds(200));
  c.Tick(start + std::chrono::milliseconds(200));
  ASSERT_EQ(c.window(), 64);
  const int after_first = c.connections();
  for (int i = 0; i < 25; ++i) c.OnComplete(110000, std::chrono::milliseconds(200));
  for (int i = 0; i < 11; ++i) c.OnComplete(110000, std::chrono::milliseconds(230));
  c.Tick(start + std::chrono::milliseconds(440));  // a verdict: at least the smoothed latency after the last
  EXPECT_EQ(c.phase(), WindowController::Phase::kStartup);
  EXPECT_GT(c.connections(), after_first);
}

TEST(WindowControllerTest, TheFirstConnectionsAreForFourTimesTheInitialWindow) {
  EXPECT_EQ(WindowController::InitialConnections(32, 110e3), 7);  // 14.1 MB / 2 MiB
  EXPECT_EQ(WindowController::InitialConnections(32, 540), 1);
  EXPECT_EQ(WindowController::InitialConnections(32, 0), 1);
  EXPECT_EQ(WindowController::InitialConnections(0, 110e3), 1);
  EXPECT_EQ(WindowController::InitialConnections(1 << 20, 64e6), WindowController::kDefaultMaxConnections);
}

TEST(WindowControllerTest, TheUsersConnectionLimitIsKept) {
  WindowController::Options o;
  o.max_connections = 8;
  PathRun r = SimulatePath(0.2, 800e6, 4 * 1048576.0, 10, 110e3, o);
  EXPECT_LE(r.max_connections, 8);
  EXPECT_NEAR(r.steady, 8 * 4 * 1048576.0 / 0.2, 0.1 * 8 * 4 * 1048576.0 / 0.2);
}

// Issue 13 review: a node that refuses connections beyond 24 stops the
// growth (the controller no longer asks for 256 the session cannot open),
// and the loader still gets what 24 connections carry.

TEST(WindowControllerTest, RefusedConnectionsStopTheGrowth) {
  const double per_conn = 4 * 1048576.0 / 0.2;
  PathRun r = SimulatePath(0.2, 800e6, 4 * 1048576.0, 20, 110e3, {}, 24);
  SCOPED_TRACE(testing::Message() << "steady " << r.steady / 1e6 << " MB/s, connections max " << r.max_connections
                                  << " final " << r.final_connections);
  EXPECT_GT(r.max_connections, 24);  // it did ask for more before the refusal
  EXPECT_EQ(r.final_connections, 24);
  EXPECT_LE(r.max_connections_after_refusal, 24);
  EXPECT_GE(r.steady, 0.9 * 24 * per_conn);
}

TEST(WindowControllerTest, ConnectionLimitBelowTheCurrentCountLowersIt) {
  WindowController::Options o;
  o.initial_connections = 10;
  WindowController c(o, Clock::now());
  EXPECT_EQ(c.connections(), 10);
  c.SetConnectionLimit(6);
  EXPECT_EQ(c.connections(), 6);
  c.SetConnectionLimit(0);  // none known: the count stays, growth may resume
  EXPECT_EQ(c.connections(), 6);
}

TEST(WindowControllerTest, AddsConnectionsWhenEachConnectionIsWindowLimited) {
  // A WAN path: 4 MiB per connection per round trip, 600 MB/s in all; two
  // connections carry 84 MB/s at 100 ms, sixteen can fill the link.
  for (double rtt : {0.05, 0.1, 0.2}) {
    Pipe p{rtt, 600e6};
    p.conn_window = 4 * 1048576.0;
    double mean = 0;
    auto c = Simulate(p, 60, {}, &mean);
    SCOPED_TRACE(c.Describe());
    EXPECT_GE(mean, 0.9 * p.Cap(16)) << "rtt " << rtt;
    EXPECT_GE(c.connections(), static_cast<int>(std::ceil(p.Cap(16) * rtt / p.conn_window))) << "rtt " << rtt;
    EXPECT_LE(c.window(), 4 * p.Bdp() + 64) << "rtt " << rtt;
  }
}

TEST(WindowControllerTest, AUserWindowCapStillLetsConnectionsGrow) {
  // --max-in-flight 800 on the same WAN path: the window reaches the user's
  // cap while each connection is still window-limited; only more
  // connections can fill the link (before this rule the controller left
  // start-up at the cap with 8 connections and 40% of the path).
  Pipe p{0.1, 600e6};
  p.conn_window = 4 * 1048576.0;
  WindowController::Options o;
  o.max_window = 800;
  o.max_connections = 32;
  double mean = 0;
  auto c = Simulate(p, 60, o, &mean);
  SCOPED_TRACE(c.Describe());
  EXPECT_GE(mean, 0.9 * p.bw);
  EXPECT_LE(c.window(), 800);
  EXPECT_GE(c.connections(), static_cast<int>(std::ceil(p.bw * p.rtt_s / p.conn_window)));
}

}  // namespace
}  // namespace cqlstream::loader
