// Copyright (c) cqlstream authors.
#include "loader/window.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

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
                          double* mean_goodput = nullptr) {
  double sum = 0;
  int samples = 0;
  auto now = Clock::time_point{} + std::chrono::hours(1);
  WindowController c(o, now);
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
    if (t >= seconds / 2) {
      sum += goodput;
      ++samples;
    }
  }
  if (mean_goodput) *mean_goodput = sum / std::max(1, samples);
  return c;
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
  EXPECT_LE(c.connections(), 4);
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
