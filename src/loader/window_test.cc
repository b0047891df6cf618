// Copyright (c) cqlstream authors.
#include "loader/window.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <deque>
#include <vector>

namespace cqlstream::loader {
namespace {

using Clock = WindowController::Clock;

// A pipe with a fixed round trip and a bandwidth limit: with w requests in
// flight over `conns` connections, goodput = min(w * size / rtt, Cap(conns))
// and latency grows once the pipe is full (queueing).
struct Pipe {
  double rtt_s;
  double bw;        // bytes/s
  double size = 100e3;
  // Per connection at most `conn_window` bytes per round trip (0: no limit).
  double conn_window = 0;
  double Cap(int conns) const { return conn_window > 0 ? std::min(bw, conns * conn_window / rtt_s) : bw; }
  double Goodput(int w, int conns) const { return std::min(w * size / rtt_s, Cap(conns)); }
  double Latency(int w, int conns) const { return std::max(rtt_s, w * size / Cap(conns)); }
  double Bdp() const { return bw * rtt_s / size; }  // requests
};

// Drives the controller for `seconds` of simulated time; *mean_goodput gets
// the average goodput of the last half.
WindowController Simulate(const Pipe& p, double seconds, WindowController::Options o = {},
                          double* mean_goodput = nullptr, int* max_connections = nullptr, bool shrink = true) {
  double sum = 0;
  int samples = 0;
  auto now = Clock::time_point{} + std::chrono::hours(1);
  WindowController c(o, now);
  c.SetConnectionsShrink(shrink);
  const auto step = std::chrono::milliseconds(10);
  for (double t = 0; t < seconds; t += 0.01) {
    const int w = c.window();
    const double goodput = p.Goodput(w, c.connections());
    const double lat = p.Latency(w, c.connections());
    const double completions = goodput / p.size * 0.01;
    for (int i = 0; i < static_cast<int>(std::lround(completions)); ++i) {
      c.OnComplete(static_cast<int64_t>(p.size), std::chrono::microseconds(static_cast<int64_t>(lat * 1e6)));
    }
    now += step;
    c.Tick(now);
    if (max_connections) *max_connections = std::max(*max_connections, c.connections());
    if (t >= seconds / 2) {
      sum += goodput;
      ++samples;
    }
  }
  if (mean_goodput) *mean_goodput = sum / std::max(1, samples);
  return c;
}

// A path in fake time, request by request: a node that serves at most
// `node_bw` bytes/s (FIFO), one TCP window of `conn_window` bytes per round
// trip per open connection, a fixed round trip `rtt_s`, and connections that
// open 3 round trips after the controller asks for them (TCP, OPTIONS,
// STARTUP).
// Answers arrive one round trip after the node sent them, so the
// controller sees what a window did one round trip later, as in life.
struct PathRun {
  std::vector<double> bins;  // delivered bytes/s per 100 ms
  int max_window = 0;          // over the run
  int max_startup_window = 0;  // while in start-up
  int max_connections = 0;
  int final_connections = 0;
  double mean_connections_late = 0;  // the controller's count, averaged over the last half
  int max_connections_after_refusal = 0;  // once the controller was told the limit
  double max_node_queue_s = 0;  // longest wait at the node (start-up)
  int startup_resumes = 0;      // WindowController::startup_resumes() at the end
  int connections_at_startup_end = 0;  // the controller's count when start-up first ended (0: never)
  int window_at_startup_end = 0;
  double steady = 0;  // mean of the last half
  // From the first request until the rate first reaches 90% of `steady` and
  // holds it for the following second.
  double TimeTo90() const {
    for (size_t i = 0; i + 10 <= bins.size(); ++i) {
      bool holds = true;
      for (size_t k = i; k < i + 10; ++k) holds = holds && bins[k] >= 0.9 * steady;
      if (holds) return static_cast<double>(i + 1) / 10.0;
    }
    return 1e9;
  }
};

// `connection_limit` > 0: the node takes no more connections than that (as
// native_transport_max_connections_per_ip); the session learns it when an
// open beyond it is refused, one round trip after it was asked for, and
// then tells the controller (SetConnectionLimit), as the loader does.
// `congest_at`: times (ascending) of a timeout or an overload answer
// (OnCongestion), as a stall of the path or a node shedding load causes.
PathRun SimulatePath(double rtt_s, double node_bw, double conn_window, double seconds, double size = 110e3,
                     WindowController::Options o = {}, int connection_limit = 0,
                     std::vector<double> congest_at = {}, bool shrink = true) {
  auto now = Clock::time_point{} + std::chrono::hours(1);
  const auto start = now;
  WindowController c(o, now);
  c.SetConnectionsShrink(shrink);
  std::deque<std::pair<double, double>> in_flight;  // (arrival time, issue time), arrival-ordered
  std::deque<std::pair<double, int>> opening;       // (open time, connections)
  int open = c.connections();
  double refused_at = -1;  // when the first refused open fails (-1: none yet)
  bool told = false;
  double node_free = 0;
  PathRun r;
  r.bins.assign(static_cast<size_t>(seconds * 10), 0.0);
  const double dt = 0.0005;
  for (double t = 0; t < seconds; t += dt) {
    while (!opening.empty() && opening.front().first <= t) {
      open = std::max(open, opening.front().second);
      if (connection_limit > 0) open = std::min(open, connection_limit);
      opening.pop_front();
    }
    if (refused_at >= 0 && t >= refused_at && !told) {
      c.SetConnectionLimit(connection_limit);
      told = true;
    }
    const double rate = std::min(node_bw, open * conn_window / rtt_s);
    while (static_cast<int>(in_flight.size()) < c.window()) {
      node_free = std::max(node_free, t + rtt_s / 2) + size / rate;  // the request reaches the node, is served
      in_flight.emplace_back(node_free + rtt_s / 2, t);
    }
    while (!in_flight.empty() && in_flight.front().first <= t) {
      c.OnComplete(static_cast<int64_t>(size),
                   std::chrono::microseconds(static_cast<int64_t>((t - in_flight.front().second) * 1e6)));
      in_flight.pop_front();
      r.bins[std::min(r.bins.size() - 1, static_cast<size_t>(t * 10))] += size * 10;
    }
    now = start + std::chrono::microseconds(static_cast<int64_t>((t + dt) * 1e6));
    if (!congest_at.empty() && t >= congest_at.front()) {
      c.OnCongestion(now);
      congest_at.erase(congest_at.begin());
    }
    const int before = c.connections();
    const bool was_startup = c.phase() == WindowController::Phase::kStartup;
    c.Tick(now);
    if (was_startup && c.phase() == WindowController::Phase::kSteady && r.connections_at_startup_end == 0) {
      r.connections_at_startup_end = c.connections();
      r.window_at_startup_end = c.window();
    }
    // Open after TCP and OPTIONS+STARTUP (net/connection.cc sends them together).
    if (c.connections() > before) opening.emplace_back(t + 2 * rtt_s, c.connections());
    // Fewer: the pool parks the surplus at once (net/pool.h); more again
    // waits for the opening above (conservative: parked ones would come
    // back at once).
    if (c.connections() < before) {
      open = std::min(open, c.connections());
      for (auto& o : opening) o.second = std::min(o.second, c.connections());
    }
    if (connection_limit > 0 && c.connections() > connection_limit && refused_at < 0) refused_at = t + rtt_s;
    if (told) r.max_connections_after_refusal = std::max(r.max_connections_after_refusal, c.connections());
    r.max_window = std::max(r.max_window, c.window());
    if (c.phase() == WindowController::Phase::kStartup) {
      r.max_startup_window = std::max(r.max_startup_window, c.window());
      r.max_node_queue_s = std::max(r.max_node_queue_s, node_free - (t + rtt_s / 2));
    }
    r.max_connections = std::max(r.max_connections, c.connections());
    if (t >= seconds / 2) r.mean_connections_late += c.connections() * dt / (seconds - seconds / 2);
  }
  r.final_connections = c.connections();
  r.startup_resumes = c.startup_resumes();
  double sum = 0;
  for (size_t i = r.bins.size() / 2; i < r.bins.size(); ++i) sum += r.bins[i];
  r.steady = sum / static_cast<double>(r.bins.size() - r.bins.size() / 2);
  return r;
}

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
  // (here 256 -> 91 at 200 ms, 248 -> 49 at 100 ms). With 1 MiB TCP windows
  // (a host tuned down) the path needs more connections than the floor of
  // 2 MiB each assumes: a probe below what it needs loses and is undone.
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

TEST(WindowControllerTest, SettlesNearTheBandwidthDelayProduct) {
  for (double rtt : {0.001, 0.01, 0.05, 0.1, 0.2}) {
    Pipe p{rtt, 1e9};  // 1 GB/s
    double mean = 0;
    auto c = Simulate(p, 120, {}, &mean);
    SCOPED_TRACE(c.Describe());
    EXPECT_GE(mean, 0.95 * p.bw) << "rtt " << rtt;
    EXPECT_LE(c.window(), 4 * p.Bdp() + 64) << "rtt " << rtt;
    EXPECT_EQ(c.phase(), WindowController::Phase::kSteady);
  }
}

TEST(WindowControllerTest, SmallerWindowsAreNotKeptOneSmallLossAtATime) {
  // A node-bound path at a short round trip whose goodput still rises a
  // little with the window (a soft knee: w / (w + knee) of the node's
  // rate, as requests pipelined at the node give), measured with +-4%
  // noise (a busy 2-core machine). Each x0.9 step of a smaller-window
  // probe costs 1-3%, within the 3% such a probe may lose; judged one at a
  // time, the steps added up and walked the window down (to 0.80-0.91 of
  // the goodput start-up reached, here; on the real node at RTT 0, 64 -> 9
  // requests in one run, goodput -15%). Judged against the best goodput a
  // smaller window was kept from as well, the goodput stays within 5% of
  // where start-up left it (3%, and the noise), and the window does not
  // climb far past it either.
  const double bw = 800e6, size = 110e3, rtt = 0.001;
  for (double knee : {2.0, 4.0}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      auto clean = [&](int w) { return bw * w / (w + knee); };
      uint64_t state = seed;
      auto noise = [&state] {  // splitmix64: the same sequence with every standard library
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        return 0.96 + 0.08 * static_cast<double>(z >> 11) / 9007199254740992.0;
      };
      auto now = Clock::time_point{} + std::chrono::hours(1);
      WindowController c({}, now);
      double factor = 1, at_startup_end = 0, late_sum = 0;
      int late_n = 0, steps = 0, window_at_startup_end = 0;
      for (double t = 0; t < 300; t += 0.01, ++steps) {
        if (steps % 10 == 0) factor = noise();  // a new measure every 100 ms
        const int w = c.window();
        const double g = clean(w) * factor;
        const double lat = std::max(rtt, w * size / g);
        for (int i = 0; i < static_cast<int>(std::lround(g / size * 0.01)); ++i) {
          c.OnComplete(static_cast<int64_t>(size), std::chrono::microseconds(static_cast<int64_t>(lat * 1e6)));
        }
        now += std::chrono::milliseconds(10);
        c.Tick(now);
        if (at_startup_end == 0 && c.phase() == WindowController::Phase::kSteady) {
          at_startup_end = clean(c.window());
          window_at_startup_end = c.window();
        }
        if (t >= 150) {
          late_sum += clean(c.window());
          ++late_n;
        }
      }
      SCOPED_TRACE(testing::Message() << "knee " << knee << " seed " << seed << ": " << c.Describe());
      ASSERT_GT(at_startup_end, 0);
      const double late = late_sum / late_n;
      std::printf("knee %.0f, seed %u: goodput when start-up ended %.0f MB/s, mean of the last 150 s %.0f MB/s (%.2f), "
                  "window %d (%d when start-up ended)\n",
                  knee, static_cast<unsigned>(seed), at_startup_end / 1e6, late / 1e6, late / at_startup_end,
                  c.window(), window_at_startup_end);
      EXPECT_GE(late, 0.95 * at_startup_end);
      EXPECT_LE(c.window(), 3 * window_at_startup_end);
    }
  }
}

TEST(WindowControllerTest, AfterThePathSlowsSmallerWindowsAreKeptAgain) {
  // The node's rate halves after 60 s without a timeout (other clients,
  // a host gone): goodput falls far below the best a smaller window was
  // kept from, which no longer says anything about this path. Smaller
  // windows are kept again, down to about the new bandwidth-delay
  // product, rather than all losing against the old reference.
  const double rtt = 0.01, size = 100e3;
  auto now = Clock::time_point{} + std::chrono::hours(1);
  WindowController c({}, now);
  int window_at_step = 0;
  for (double t = 0; t < 240; t += 0.01) {
    const double bw = t < 60 ? 1e9 : 0.5e9;
    if (t >= 60 && window_at_step == 0) window_at_step = c.window();
    const Pipe p{rtt, bw, size};
    const int w = c.window();
    const double g = p.Goodput(w, c.connections());
    const double lat = p.Latency(w, c.connections());
    for (int i = 0; i < static_cast<int>(std::lround(g / size * 0.01)); ++i) {
      c.OnComplete(static_cast<int64_t>(size), std::chrono::microseconds(static_cast<int64_t>(lat * 1e6)));
    }
    now += std::chrono::milliseconds(10);
    c.Tick(now);
  }
  SCOPED_TRACE(c.Describe());
  const double new_bdp = 0.5e9 * rtt / size;  // 50 requests
  std::printf("window when the rate halved %d, at the end %d (the new bandwidth-delay product: %.0f)\n",
              window_at_step, c.window(), new_bdp);
  EXPECT_LE(c.window(), 1.5 * new_bdp);
  EXPECT_LT(c.window(), window_at_step);
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

TEST(WindowControllerTest, ConnectionsStopGrowingWhenTheyDoNotPay) {
  // A busy server (no per-connection limit): requests queue as the window
  // grows, but more connections bring nothing.
  Pipe p{0.001, 300e6};
  double mean = 0;
  auto c = Simulate(p, 60, {}, &mean);
  SCOPED_TRACE(c.Describe());
  EXPECT_GE(mean, 0.95 * p.bw);
  // Start-up opens connections for the bytes in flight of its first round
  // trips (2 -> 5 here); they do not grow further.
  EXPECT_LE(c.connections(), 5);
}

TEST(WindowControllerTest, MoreConnectionsThatDoNotPayAreGivenBack) {
  // Requests wait 3x as long after start-up as in it (the lowest latency
  // seen drifts up 1% an interval: more-connections probes run), and the
  // node, not the connections, limits goodput: each probe's connections
  // are given back. Fewer-connections probes are off (a session that
  // cannot shrink), so only the give-back lowers the count.
  const double rtt = 0.02, bw = 300e6, size = 100e3;
  auto now = Clock::time_point{} + std::chrono::hours(1);
  WindowController c({}, now);
  c.SetConnectionsShrink(false);
  int after_startup = 0, most = 0;
  for (double t = 0; t < 60; t += 0.01) {
    const bool startup = c.phase() == WindowController::Phase::kStartup;
    if (!startup && after_startup == 0) after_startup = c.connections();
    const double lat = (startup ? 1.0 : 3.0) * std::max(rtt, c.window() * size / bw);
    const double goodput = std::min(c.window() * size / lat, bw);
    for (int i = 0; i < static_cast<int>(std::lround(goodput / size * 0.01)); ++i) {
      c.OnComplete(static_cast<int64_t>(size), std::chrono::microseconds(static_cast<int64_t>(lat * 1e6)));
    }
    now += std::chrono::milliseconds(10);
    c.Tick(now);
    most = std::max(most, c.connections());
  }
  SCOPED_TRACE(c.Describe());
  ASSERT_GT(after_startup, 0);
  EXPECT_GT(most, after_startup);  // a more-connections probe ran
  EXPECT_EQ(c.connections(), after_startup);
}

TEST(WindowControllerTest, FewerConnectionsStopAtTheBytesInFlightAndOnlyWhereTheSessionShrinks) {
  // No per-connection limit: every fewer-connections probe costs nothing,
  // and the count falls to the floor (one per 2 MiB the window keeps in
  // flight), not below. Where the session cannot shrink (ScyllaDB's
  // shard-aware pools), or with fewer than kKeptConnections, no
  // fewer-connections probe runs.
  Pipe p{0.2, 800e6, 110e3, 0};
  int most = 0;
  auto c = Simulate(p, 120, {}, nullptr, &most);
  SCOPED_TRACE(c.Describe());
  // The controller's floor: the window's bytes, at most the
  // bandwidth-delay product of its goodput.
  const double wire = std::min(c.window() * p.size, c.goodput() * static_cast<double>(c.min_latency().count()) / 1e6);
  const int floor = static_cast<int>(std::ceil(wire / WindowController::kBytesPerConnection));
  EXPECT_LT(c.connections(), most);
  EXPECT_GE(c.connections(), floor);
  EXPECT_LE(c.connections(), floor * 4 / 3 + 1);  // one more step would have gone below
  PathRun r = SimulatePath(0.2, 800e6, 4 * 1048576.0, 40, 110e3, {}, 0, {}, /*shrink=*/false);
  EXPECT_EQ(r.final_connections, r.max_connections);
  // A few connections (13 at 10 ms) are not worth a probe's dip.
  PathRun short_path = SimulatePath(0.01, 800e6, 4 * 1048576.0, 40, 110e3);
  ASSERT_LT(short_path.max_connections, WindowController::kKeptConnections);
  EXPECT_EQ(short_path.final_connections, short_path.max_connections);
}

TEST(WindowControllerTest, CongestionDuringFewerConnectionsUndoesThem) {
  // A timeout or an overload answer while fewer connections are under test
  // may be their doing: the count goes back to what it was at once. (The
  // loader sends it to the session at its next tick: it compares the count
  // with the last one it sent, not with the one before Tick().)
  Pipe p{0.1, 800e6, 110e3, 4 * 1048576.0};
  auto now = Clock::time_point{} + std::chrono::hours(1);
  WindowController c({}, now);
  bool undone = false;
  for (double t = 0; t < 60 && !undone; t += 0.01) {
    const int w = c.window(), n = c.connections();
    const double completions = p.Goodput(w, n) / p.size * 0.01;
    const auto lat = std::chrono::microseconds(static_cast<int64_t>(p.Latency(w, n) * 1e6));
    for (int i = 0; i < static_cast<int>(std::lround(completions)); ++i) {
      c.OnComplete(static_cast<int64_t>(p.size), lat);
    }
    now += std::chrono::milliseconds(10);
    c.Tick(now);
    // A fewer-connections probe starts: fewer connections, the same window
    // (a larger-window probe given back changes both).
    if (c.phase() == WindowController::Phase::kSteady && c.connections() < n && c.window() == w) {
      c.OnCongestion(now);
      EXPECT_EQ(c.connections(), n);
      undone = true;
    }
  }
  EXPECT_TRUE(undone) << "no fewer-connections probe in 60 s: " << c.Describe();
}

TEST(WindowControllerTest, AUserCapBelowTheFloorIsKept) {
  WindowController::Options o;
  o.initial_window = 8;
  o.max_window = 16;  // --max-in-flight 16, adaptive
  double mean = 0;
  auto c = Simulate(Pipe{0.01, 1e9}, 10, o, &mean);
  EXPECT_LE(c.window(), 16);
  EXPECT_GE(c.window(), o.min_window);
}

TEST(WindowControllerTest, CongestionShrinksTheWindow) {
  auto now = Clock::now();
  WindowController::Options o;
  o.initial_window = 1000;
  WindowController c(o, now);
  c.OnCongestion(now);
  EXPECT_EQ(c.window(), 700);
  for (int i = 0; i < 20; ++i) c.OnCongestion(now);
  EXPECT_EQ(c.window(), o.min_window);
}

TEST(WindowControllerTest, FixedWindowWhenNotAdaptive) {
  WindowController::Options o;
  o.adaptive = false;
  o.max_window = 500;
  auto c = Simulate(Pipe{0.01, 1e9}, 5, o);
  EXPECT_EQ(c.window(), 500);
}

TEST(WindowControllerTest, HeldBackIntervalsDoNotGrowTheWindow) {
  auto now = Clock::now();
  WindowController c({}, now);
  const int w0 = c.window();
  for (int i = 0; i < 50; ++i) {
    for (int k = 0; k < 100; ++k) c.OnComplete(1000, std::chrono::microseconds(1000));
    c.OnHeldBack();
    now += std::chrono::milliseconds(200);
    c.Tick(now);
  }
  EXPECT_EQ(c.window(), w0);
}

}  // namespace
}  // namespace cqlstream::loader
