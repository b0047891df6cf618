// Copyright (c) cqlstream authors.
//
// WindowController: steady state's probes (larger and smaller windows,
// more and fewer connections), congestion, fixed and held-back windows.
// Start-up and the connection count: window_test.cc.
#include "loader/window.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "loader/window_model_test_util.h"

namespace cqlstream::loader {
namespace {

using window_model::Clock;
using window_model::Pipe;
using window_model::Simulate;
using window_model::PathRun;
using window_model::SimulatePath;

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
  // the goodput start-up reached, here; on the real node at RTT 0 one run
  // ended at 9 requests, with 15% fewer images/s than others). Judged against the best goodput a
  // smaller window was kept from as well, the goodput stays within 5% of
  // where start-up left it (3%, and the noise), and the window does not
  // climb far past it either. (Since smaller-window probes stop at kMinCap,
  // 64 requests, the windows at 1 ms stay at 64-80 whatever the reference.
  // At 20 ms, with a knee of 10 or 20 requests, start-up ends at 160-179;
  // without the reference the probes walked those windows toward the floor,
  // below 0.95 of the goodput (0.930-0.946); with it the goodput stays at
  // 0.954-1.01. There the window climbs past 1.5x: with the +-4% noise some
  // larger-window probes gain the 5% they must, though the clean curve
  // gains less; 2x bounds it.)
  const double bw = 800e6, size = 110e3;
  struct Case {
    double rtt, knee, climb;  // climb: the most the window may end above where start-up left it
  };
  for (Case k : {Case{0.001, 2, 1.5}, Case{0.001, 4, 1.5}, Case{0.02, 10, 2}, Case{0.02, 20, 2}}) {
    const double rtt = k.rtt, knee = k.knee;
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
      SCOPED_TRACE(testing::Message() << "rtt " << rtt << " knee " << knee << " seed " << seed << ": " << c.Describe());
      ASSERT_GT(at_startup_end, 0);
      const double late = late_sum / late_n;
      std::printf("%.0f ms, knee %.0f, seed %u: goodput when start-up ended %.0f MB/s, "
                  "mean of the last 150 s %.0f MB/s (%.2f), window %d (%d when start-up ended)\n",
                  rtt * 1e3, knee, static_cast<unsigned>(seed), at_startup_end / 1e6, late / 1e6, late / at_startup_end,
                  c.window(), window_at_startup_end);
      EXPECT_GE(late, 0.95 * at_startup_end);
      EXPECT_LE(c.window(), k.climb * window_at_startup_end);
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
  double late_goodput = 0;
  int late_n = 0;
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
    if (t >= 180) {
      late_goodput += g;
      ++late_n;
    }
  }
  SCOPED_TRACE(c.Describe());
  const double new_bdp = 0.5e9 * rtt / size;  // 50 requests
  std::printf("window when the rate halved %d, at the end %d (the new bandwidth-delay product: %.0f)\n",
              window_at_step, c.window(), new_bdp);
  EXPECT_LE(c.window(), 1.5 * new_bdp);
  EXPECT_LT(c.window(), window_at_step);
  EXPECT_GE(late_goodput / late_n, 0.95 * 0.5e9);  // not below what the path carries
}

// A run whose round trip changed (`back`: PathRun::BackAfter) is at 90% of
// the node's rate again within 10 s and carries 95% of it in its last half,
// as bounded as a start-up that nothing disturbed: at most `resumes`
// resumes, a window within 3 bandwidth-delay products (of the longer path,
// `bdp` requests) and a queue at the node within about two round trips
// (SlowStartReaches90PercentWithinTargets,
// AStartUpCutShortStillReachesFullSpeedSoon).
void ExpectFilledAgain(const PathRun& r, double back, double node, double rtt, double bdp, int resumes) {
  EXPECT_GE(back, 0.0);
  EXPECT_LE(back, 10.0);
  EXPECT_GE(r.steady, 0.95 * node);
  EXPECT_LE(r.startup_resumes, resumes);
  EXPECT_LE(r.max_window, 3.0 * bdp + 64);
  EXPECT_LE(r.max_node_queue_s, 2.3 * rtt);
}

TEST(WindowControllerTest, APathWhoseRoundTripRoseIsFilledAgain) {
  // The round trip changes at 10 s of a run (a route change, a failover to
  // a far data centre). Before a step down in goodput restarted the average
  // and the lowest latency, the controller judged the new path against the
  // old one for minutes: the 3-BDP cap of goodput x 20 ms held the window
  // near a tenth of a 200 ms path's, probes were judged against the old
  // goodput, and a resumed start-up read its first round trip as queueing.
  // The last 30 s of these runs carried 34, 6, 141, 13 and 493 MB/s of 800.
  // A round trip that falls costs nothing either way.
  const double node = 800e6, size = 110e3;
  struct Case {
    double from, to;
  };
  for (Case k : {Case{0.02, 0.2}, Case{0.005, 0.1}, Case{0.05, 0.2}, Case{0.001, 0.05}, Case{0.1, 0.2},
                 Case{0.005, 0.015}, Case{0.01, 0.025}, Case{0.02, 0.04}, Case{0.002, 0.008}, Case{0.2, 0.02},
                 Case{0.2, 0.001}}) {
    const double change = 10;
    PathRun r = SimulatePath(k.from, node, 4 * 1048576.0, 60, size, {}, 0, {}, /*shrink=*/true,
                             {.rtt_steps = {{change, k.to}}});
    const double back = r.BackAfter(change, 0.9 * node);  // at 90% of the node's rate for a second
    const double rtt = std::max(k.from, k.to) + size / node, bdp = node * rtt / size;
    std::printf("%.0f -> %.0f ms at %.0f s: at 90%% again %.1f s after, last 30 s %.0f MB/s, steps %d, resumed %d, "
                "window max %d (%.1f bandwidth-delay products of the longer path), start-up's queue at the node "
                "%.2f s\n",
                k.from * 1e3, k.to * 1e3, change, back, r.steady / 1e6, r.level_steps, r.startup_resumes, r.max_window,
                r.max_window / bdp, r.max_node_queue_s);
    SCOPED_TRACE(testing::Message() << k.from << " -> " << k.to);
    ExpectFilledAgain(r, back, node, rtt, bdp, /*resumes=*/1);
    if (k.to > k.from && back > 0) {
      // A rise that cost goodput was seen as a changed path: a step, or a
      // probe that paid a start-up round trip's gain (5 -> 15 ms; 2 -> 8 ms
      // costs nothing at a window of kMinCap).
      EXPECT_GE(r.level_steps + r.startup_resumes, 1);
    }
  }
}

TEST(WindowControllerTest, APathThatRoseAfterTheNodeShedLoadIsClimbedAgain) {
  // Congestion after a resumed start-up ends the resuming (a node that sheds
  // load is not pushed into it again: ANodeThatKeepsSheddingLoadIsNotPushedIntoItAgainAndAgain).
  // That verdict was the old path's: when the round trip then rose (50 or
  // 100 -> 200 ms at 10 s), x1.25 probes alone climbed the new path, back at
  // 90% only 16-36 s after the change, or not within 50 s (300 MB/s of 800
  // in the last 30 s). A step down allows one more resume.
  const double node = 800e6, size = 110e3, change = 10;
  for (double from : {0.05, 0.1}) {
    for (double second : {2.0, 3.0, 4.0, 6.0}) {
      // Start-up ends on congestion at 0.3 s, resumes, and the congestion
      // at `second` follows the resume.
      PathRun before = SimulatePath(from, node, 4 * 1048576.0, second, size, {}, 0, {0.3});
      ASSERT_EQ(before.startup_resumes, 1) << from << " " << second;
      PathRun r = SimulatePath(from, node, 4 * 1048576.0, 60, size, {}, 0, {0.3, second}, /*shrink=*/true,
                               {.rtt_steps = {{change, 0.2}}});
      const double back = r.BackAfter(change, 0.9 * node);
      const double rtt = 0.2 + size / node, bdp = node * rtt / size;
      std::printf("%.0f -> 200 ms, congestion at 0.3 and %.0f s: at 90%% again %.1f s after the change, last 30 s "
                  "%.0f MB/s, resumed %d, window max %d, queue at the node %.2f s\n",
                  from * 1e3, second, back, r.steady / 1e6, r.startup_resumes, r.max_window, r.max_node_queue_s);
      SCOPED_TRACE(testing::Message() << from << " " << second);
      ExpectFilledAgain(r, back, node, rtt, bdp, /*resumes=*/2);
    }
  }
  // A node that sheds load every 2 s before the change and again from 10 s
  // after it: one more resume for the new path, not one after each overload
  // answer.
  std::vector<double> shed;
  for (double t = 1.0; t < 60; t += 2) {
    if (t < change || t > change + 10) shed.push_back(t);
  }
  for (double from : {0.02, 0.05}) {
    PathRun r = SimulatePath(from, node, 4 * 1048576.0, 60, size, {}, 0, shed, /*shrink=*/true,
                             {.rtt_steps = {{change, 0.2}}});
    std::printf("%.0f -> 200 ms, overload every 2 s but for 10 s after the change: resumed %d, steps %d\n",
                from * 1e3, r.startup_resumes, r.level_steps);
    EXPECT_GE(r.level_steps, 1) << from;  // the rise was a step: a resume was allowed again
    EXPECT_LE(r.startup_resumes, 2) << from;
  }
}

TEST(WindowControllerTest, ANodeThatSlowedAfterItShedLoadIsNotPushedIntoItAgain) {
  // A step down allows one more resume (the test above), but a step that a
  // slower node caused is no new path: the larger window probed after it
  // does not pay, and the verdict that congestion after the resume gave is
  // restored. When the node is fast again the window climbs x1.25 a probe,
  // not by a start-up that would push the node into shedding load again.
  // This guards that restore: without it each of these cases resumed a
  // second time. Not every slowdown of the model ends so: of 32 (to 0.3 or
  // 0.5 of the rate, from 8 or 15 s, for 5 or 15 s, at 20-200 ms), 9
  // resumed a second time with the restore too (why was not traced); 8,
  // these four among them, did only without it.
  const double node = 800e6, size = 110e3;
  struct Slowdown {
    double rate, from, to;
  };
  for (double rtt : {0.05, 0.1}) {
    // The resume comes before the congestion at 3 s (which then ends the
    // resuming).
    PathRun before = SimulatePath(rtt, node, 4 * 1048576.0, 3.0, size, {}, 0, {0.3});
    ASSERT_EQ(before.startup_resumes, 1) << rtt;
  }
  for (Slowdown s : {Slowdown{node / 2, 8, 23}, Slowdown{0.3 * node, 15, 30}}) {
    for (double rtt : {0.05, 0.1}) {
      PathRun r = SimulatePath(rtt, node, 4 * 1048576.0, 60, size, {}, 0, {0.3, 3.0}, /*shrink=*/true,
                               {.node_rates = {{s.from, s.rate}, {s.to, node}}});
      std::printf("%.0f ms, congestion at 0.3 and 3 s, the node at %.0f MB/s from %.0f to %.0f s: resumed %d, "
                  "steps %d, last 30 s %.0f MB/s\n",
                  rtt * 1e3, s.rate / 1e6, s.from, s.to, r.startup_resumes, r.level_steps, r.steady / 1e6);
      SCOPED_TRACE(testing::Message() << rtt << " " << s.rate << " " << s.from);
      EXPECT_GE(r.level_steps, 1);      // a step (the slowdown's: without the restore a second resume follows)
      EXPECT_EQ(r.startup_resumes, 1);  // the one before the congestion at 3 s
      EXPECT_GE(r.steady, 0.9 * node);  // climbed back all the same
    }
  }
}

TEST(WindowControllerTest, OnlyAStepThatLastsRestartsTheGoodputAverage) {
  // A node-bound path (the window does not change goodput) whose node serves
  // a quarter of its rate for a while: a step that lasts restarts the
  // average; a dip of under a second does not, at 200 ms (intervals of
  // 0.8 s) nor at 10 ms, where it spans nine 100-ms intervals (a step
  // without the 1-s rule).
  struct Run {
    double latency_s, low_from, low_to, check_at;
  };
  struct Result {
    double average;  // of the full rate
    int steps;
  };
  auto run = [](Run k) {
    auto now = Clock::time_point{} + std::chrono::hours(1);
    WindowController c({}, now);
    const double full = 800e6, size = 100e3, dt = 0.01;
    for (double t = 0; t < k.check_at; t += dt) {
      const double g = t >= k.low_from && t < k.low_to ? full / 4 : full;
      for (int i = 0; i < static_cast<int>(std::lround(g * dt / size)); ++i) {
        c.OnComplete(static_cast<int64_t>(size), std::chrono::microseconds(static_cast<int64_t>(k.latency_s * 1e6)));
      }
      now += std::chrono::milliseconds(10);
      c.Tick(now);
    }
    EXPECT_EQ(c.phase(), WindowController::Phase::kSteady);
    return Result{c.goodput() / full, c.level_steps()};
  };
  // 6 s after a step down to a quarter (a probe may take three of the
  // 0.8-s intervals): following at 0.2 an interval, the average was still
  // about half.
  const Result step = run({0.2, 30, 1e9, 36});
  EXPECT_NEAR(step.average, 0.25, 0.03);
  EXPECT_EQ(step.steps, 1);
  const Result dip200 = run({0.2, 30, 30.9, 32});
  const Result dip10 = run({0.01, 30, 30.9, 32});
  std::printf("200 ms: the average 6 s after a step to 0.25: %.2f (steps %d); after a 0.9-s dip %.2f (steps %d); "
              "10 ms: after a 0.9-s dip %.2f (steps %d)\n",
              step.average, step.steps, dip200.average, dip200.steps, dip10.average, dip10.steps);
  EXPECT_EQ(dip200.steps, 0);
  EXPECT_EQ(dip10.steps, 0);
}

TEST(WindowControllerTest, ANodeThatSlowsIsAStepButNotANewRoundTrip) {
  // The node serves a third of its rate from 30 s on, the round trip stays
  // 20 ms: goodput steps down and requests wait 3x as long, in the node's
  // queue of the window's own making. The step takes the lowest latency to
  // the queued one until the larger window probed next shows whether the
  // path is window-limited; it does not pay here, and the lowest latency
  // from before the step is restored (else the 3-BDP cap and the
  // more-connections probes would go by the queue).
  Pipe p{0.02, 300e6};
  auto now = Clock::time_point{} + std::chrono::hours(1);
  WindowController c({}, now);
  double min_before = 0;
  // Until 4 s after: the step comes a second or so after the first
  // interval off, its probe three intervals later, and from then on the
  // lowest latency drifts up 1% an interval as before.
  for (double t = 0; t < 34; t += 0.01) {
    if (t >= 30 && min_before == 0) {
      min_before = static_cast<double>(c.min_latency().count()) / 1e6;
      p.bw = 100e6;
    }
    const int w = c.window();
    const double lat = p.Latency(w, c.connections());
    for (int i = 0; i < static_cast<int>(std::lround(p.Goodput(w, c.connections()) / p.size * 0.01)); ++i) {
      c.OnComplete(static_cast<int64_t>(p.size), std::chrono::microseconds(static_cast<int64_t>(lat * 1e6)));
    }
    now += std::chrono::milliseconds(10);
    c.Tick(now);
  }
  const double min_after = static_cast<double>(c.min_latency().count()) / 1e6;
  std::printf("node to a third at 30 s: steps %d, resumed %d, lowest latency %.1f ms before, %.1f ms at 34 s, "
              "window %d\n",
              c.level_steps(), c.startup_resumes(), min_before * 1e3, min_after * 1e3, c.window());
  EXPECT_EQ(c.level_steps(), 1);
  EXPECT_EQ(c.startup_resumes(), 0);
  EXPECT_LT(min_after, 1.3 * min_before);
}

TEST(WindowControllerTest, NodePausesAreNotAChangedPath) {
  // Pauses of 0.9 s at the node (garbage collection) are not steps: with no
  // answers an interval lasts until a few arrive, so a pause falls in one or
  // two intervals, and the lowest latency and the average are not restarted.
  const double node = 800e6, size = 110e3;
  for (double rtt : {0.2, 0.01}) {
    PathRun r = SimulatePath(rtt, node, 4 * 1048576.0, 60, size, {}, 0, {}, /*shrink=*/true,
                             {.node_pauses = {{20, 0.9}, {35, 0.9}, {50, 0.9}}});
    const double bdp = node * (rtt + size / node) / size;
    std::printf("rtt %.0f ms, 0.9-s pauses at 20, 35, 50 s: last 30 s %.0f MB/s, steps %d, resumed %d, window max %d "
                "(%.1f bandwidth-delay products)\n",
                rtt * 1e3, r.steady / 1e6, r.level_steps, r.startup_resumes, r.max_window, r.max_window / bdp);
    SCOPED_TRACE(testing::Message() << "rtt " << rtt);
    EXPECT_EQ(r.level_steps, 0);
    // As before steps were seen: at 10 ms the average follows a pause's
    // interval down, and the larger window probed after it pays once the
    // node is back (one resume, judged against the path's lowest latency:
    // the window stays within 3 bandwidth-delay products).
    EXPECT_LE(r.startup_resumes, 1);
    EXPECT_LE(r.max_window, 3.0 * bdp + 64);
    EXPECT_GE(r.steady, 0.9 * node);
  }
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
  // Requests wait 3x as long after start-up as in it, queued at the node
  // (goodput stays: no step; the lowest latency seen drifts up 1% an
  // interval: more-connections probes run), and the node, not the
  // connections, limits goodput: each probe's connections are given back.
  // Fewer-connections probes are off (a session that cannot shrink), so only
  // the give-back lowers the count.
  const double rtt = 0.02, bw = 300e6, size = 100e3;
  auto now = Clock::time_point{} + std::chrono::hours(1);
  WindowController c({}, now);
  c.SetConnectionsShrink(false);
  int after_startup = 0, most = 0;
  for (double t = 0; t < 60; t += 0.01) {
    const bool startup = c.phase() == WindowController::Phase::kStartup;
    if (!startup && after_startup == 0) after_startup = c.connections();
    const double lat = (startup ? 1.0 : 3.0) * std::max(rtt, c.window() * size / bw);
    const double goodput = std::min(c.window() * size / rtt, bw);
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
  // and the count falls to the floor (one per 4 MiB the window keeps on
  // the wire: kProbeBytesPerConnection), not below. Where the session
  // cannot shrink (ScyllaDB's shard-aware pools), or with fewer than
  // kKeptConnections, no fewer-connections probe runs.
  Pipe p{0.2, 800e6, 110e3, 0};
  int most = 0, fewest_late = 0;
  auto c = Simulate(p, 120, {}, nullptr, &most, /*shrink=*/true, &fewest_late);
  SCOPED_TRACE(c.Describe());
  // The floor: the bytes on the wire (the window's, at most the
  // bandwidth-delay product; the controller's estimate of it, from its
  // goodput and lowest latency, drifts a little above the path's) at
  // 4 MiB each.
  const int floor = std::max(WindowController::kKeptConnections,
                             static_cast<int>(std::ceil(p.bw * p.rtt_s / (4 * 1048576.0))));
  EXPECT_LT(c.connections(), most);
  // The fewest of the last minute (at its end a larger-window probe may
  // hold x1.25 of them).
  EXPECT_GE(fewest_late, floor);
  EXPECT_LE(fewest_late, floor * 4 / 3 + 1);  // one more step would have gone below
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
