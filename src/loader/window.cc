// Copyright (c) cqlstream authors.
#include "loader/window.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace cqlstream::loader {

WindowController::WindowController(Options o, Clock::time_point now)
    : o_(o),
      window_(std::clamp(o.initial_window, o.min_window, o.max_window)),
      connections_(std::clamp(o.initial_connections, 1, std::max(1, o.max_connections))),
      interval_start_(now),
      interval_window_(window_) {
  if (!o_.adaptive) {
    window_ = o_.max_window;
    phase_ = Phase::kSteady;
  }
}

void WindowController::OnComplete(int64_t bytes, std::chrono::microseconds latency) {
  bytes_ += bytes;
  ++completions_;
  const double us = static_cast<double>(latency.count());
  sum_latency_us_ += us;
  srtt_us_ = srtt_us_ == 0 ? us : 0.9 * srtt_us_ + 0.1 * us;
  // Slow start: one more request per completion doubles the window once
  // per round trip, whatever the round trip is.
  if (phase_ == Phase::kStartup && o_.adaptive && !held_back_ && !startup_paused_) {
    // At most a doubling per interval: an interval lasts at least one
    // round trip, so the window never outruns what was measured.
    int limit = std::min(o_.max_window, 2 * std::max(interval_window_, 1));
    if (startup_cap_ > 0) limit = std::min(limit, startup_cap_);
    if (startup_growth_cap_ > 0) limit = std::min(limit, startup_growth_cap_);
    // Requests that wait a quarter round trip (at most 16 ms) longer than
    // the fastest ones are queueing: the window is past the bandwidth-delay
    // product, and more of it would only lengthen the queue (HyStart's
    // delay signal). Windows below the floor stay free to grow (at
    // sub-millisecond round trips the latency's noise is larger than a
    // quarter of it).
    const bool queued = min_rtt_us_ > 0 && srtt_us_ > StartupDelayLimitUs() && window_ >= kMinCap;
    if (window_ < limit && !queued) ++window_;
  }
}

double WindowController::StartupDelayLimitUs() const {
  const double cap = static_cast<double>(std::chrono::microseconds(kStartupDelayCap).count());
  return min_rtt_us_ + std::min((kStartupDelayGrowth - 1.0) * min_rtt_us_, cap);
}

void WindowController::OnCongestion(Clock::time_point now) {
  if (!o_.adaptive) return;
  window_ = std::max(o_.min_window, static_cast<int>(window_ * 0.7));
  // Congestion after start-up resumed: the path (or the node, shedding
  // load) is full, not stalled. No more resuming: a node that sheds load
  // would otherwise be pushed into it over and over.
  if (startup_resumes_ > 0) may_resume_ = false;
  // A probe under way is over: its connections back to what they were.
  // Fewer under test may have caused it: not that few again.
  if (probe_ == Probe::kFewerConnections) {
    too_few_connections_ = std::max(too_few_connections_, connections_);
    too_few_age_ = 0;
  }
  if (probe_ != Probe::kNone) connections_ = std::min(saved_connections_, MaxConnections());
  fewer_reference_ = 0;
  down_reference_ = 0;  // the path changed: what it carried before says little
  // The window was cut: the average restarts at the next interval's goodput
  // (within the 30% the cut can take), a step down of the controller's own
  // making, not a changed path; probes are judged against it.
  ForgetStep();
  restart_average_ = true;
  if (step_probe_pending_) EndStepProbe(/*restore=*/true);  // the probe after a step is over, unjudged
  if (phase_ == Phase::kStartup) {
    phase_ = Phase::kSteady;
    best_window_ = window_;
    // The first start-up was cut short, maybe far below what the path
    // carries: the first probe comes after one interval, not five
    // (EvaluateSteady), so that a path that was only stalled is climbed
    // again soon.
    if (startup_resumes_ == 0) steady_intervals_ = 4;
    next_probe_ = 0;  // up first, as after EndStartup
  }
  probe_ = Probe::kNone;
  // Start a fresh measurement at the new window.
  interval_start_ = now;
  bytes_ = completions_ = 0;
  sum_latency_us_ = 0;
  held_back_ = false;
}

void WindowController::SetConnectionLimit(int limit) {
  connection_limit_ = std::max(0, limit);
  if (connection_limit_ > 0) connections_ = std::max(1, std::min(connections_, connection_limit_));
}

int WindowController::ConnectionFloor(double factor) const {
  // The bytes on the wire: the window's, but not those queued at the node
  // (at a short round trip most of a window waits there), so at most the
  // bandwidth-delay product of the best goodput.
  double bytes = static_cast<double>(window_) * std::max(mean_bytes_, 0.0);
  if (best_goodput_ > 0 && min_rtt_us_ > 0) bytes = std::min(bytes, best_goodput_ * min_rtt_us_ / 1e6);
  return ConnectionsFor(factor * bytes, MaxConnections());
}

int WindowController::ConnectionsFor(double bytes, int most) {
  const double n = std::ceil(std::max(bytes, 0.0) / kBytesPerConnection);
  return static_cast<int>(std::clamp(n, 1.0, static_cast<double>(std::max(most, 1))));
}

int WindowController::FewerConnections() const {
  if (!connections_shrink_) return connections_;
  // One per kProbeBytesPerConnection of the bytes on the wire.
  const int wire_floor = ConnectionFloor(kBytesPerConnection / kProbeBytesPerConnection);
  const int target = std::max({wire_floor, connections_ * 2 / 3, kKeptConnections});
  return target < connections_ && target > too_few_connections_ ? target : connections_;
}

int WindowController::WindowFloor() const {
  // Requests, not bytes: kFloorBytes of samples when they are large.
  double n = kMinCap;
  if (mean_bytes_ > 0) n = std::min(n, std::ceil(kFloorBytes / mean_bytes_));
  return std::clamp(static_cast<int>(n), o_.min_window, o_.max_window);
}

int WindowController::MaxConnections() const {
  const int m = std::max(1, o_.max_connections);
  return connection_limit_ > 0 ? std::min(m, connection_limit_) : m;
}

bool WindowController::Tick(Clock::time_point now) {
  if (!o_.adaptive) return false;
  const int w0 = window_, c0 = connections_;
  const auto elapsed = now - interval_start_;
  // Start-up judges each round trip (it only needs to see the doubling
  // pay), steady-state probes measure over 4 (they look for 5% gains).
  const auto srtt = std::chrono::microseconds(static_cast<int64_t>(srtt_us_));
  const auto min_len = phase_ == Phase::kStartup
                           ? std::max<std::chrono::microseconds>(o_.startup_interval, srtt)
                           : std::max<std::chrono::microseconds>(o_.min_interval, 4 * srtt);
  if (elapsed < min_len || completions_ < 8) return connections_ != c0;
  const double secs = std::chrono::duration<double>(elapsed).count();
  const double goodput = static_cast<double>(bytes_) / secs;
  const double mean_lat = sum_latency_us_ / static_cast<double>(completions_);
  const double mean_bytes = static_cast<double>(bytes_) / static_cast<double>(completions_);
  mean_bytes_ = mean_bytes_ == 0 ? mean_bytes : 0.8 * mean_bytes_ + 0.2 * mean_bytes;
  const bool held = held_back_;
  interval_start_ = now;
  bytes_ = completions_ = 0;
  sum_latency_us_ = 0;
  held_back_ = false;
  // The lowest mean latency seen approximates the unloaded round trip; it
  // drifts up slowly so that a changed path is eventually accepted, and a
  // step down in goodput (EvaluateSteady) takes it to the new path's at once.
  // (Not in start-up: its intervals are single round trips, and a drift per
  // interval would let the 3-BDP cap grow with the queue it should bound.)
  const double drift = phase_ == Phase::kStartup ? 1.0 : 1.01;
  min_rtt_us_ = min_rtt_us_ == 0 ? mean_lat : std::min(mean_lat, min_rtt_us_ * drift);
  floor_rtt_us_ = floor_rtt_us_ == 0 ? mean_lat : std::min(mean_lat, floor_rtt_us_);
  if (held) {
    // Not limited by the window: nothing to learn, and no reason to grow.
    ForgetStep();  // nor intervals in a row
    if (phase_ == Phase::kStartup) window_ = std::min(window_, std::max(interval_window_, o_.min_window));
    interval_window_ = window_;
    return window_ != w0 || connections_ != c0;
  }
  Evaluate(goodput, mean_lat, secs);
  // Requests beyond a few bandwidth-delay products only wait in queues —
  // mostly the server's: a node buffers the answers a slow path cannot take
  // yet (a 1 GiB Cassandra node ran out of direct memory at 100 ms RTT
  // before this cap, with ~1 GB of answers queued for its clients).
  const double bdp = std::max(best_goodput_, goodput) * (min_rtt_us_ / 1e6) / std::max(1.0, mean_bytes_);
  const int floor = std::min(std::max(o_.min_window, kMinCap), o_.max_window);  // a user cap may be below 64
  const int cap = std::clamp(static_cast<int>(std::min(kBdpFactor * bdp, 1e9)), floor, o_.max_window);
  window_ = std::min(window_, cap);
  startup_cap_ = cap;
  // Start-up grows the window to at most kStartupBdpFactor bandwidth-delay
  // products of what the last round trip delivered.
  const double last_bdp = goodput * (min_rtt_us_ / 1e6) / std::max(1.0, mean_bytes_);
  startup_growth_cap_ = std::clamp(static_cast<int>(std::min(kStartupBdpFactor * last_bdp, 1e9)), floor, o_.max_window);
  interval_window_ = window_;
  return window_ != w0 || connections_ != c0;
}

int WindowController::InitialConnections(int initial_window, double mean_bytes) {
  return ConnectionsFor(kConnectionLookAhead * std::max(initial_window, 1) * std::max(mean_bytes, 0.0),
                        kDefaultMaxConnections);
}

void WindowController::GrowConnections() {
  const double mean = mean_bytes_ > 0 ? mean_bytes_
                      : completions_ > 0 ? static_cast<double>(bytes_) / static_cast<double>(completions_)
                                         : 0.0;
  if (mean <= 0) return;
  // For 1.5x the window: a connection needs two round trips to open and a
  // third to bring answers, while the window doubles in one. On long round
  // trips, for the window two doublings on (kConnectionLookAhead).
  const double bytes = static_cast<double>(window_) * mean;
  // Not where the connections cannot be given back (shard-aware ScyllaDB
  // pools), nor in a resumed start-up (steady state had the path measured).
  // The latency is a request's, the node's service time included: a slow
  // node on a LAN may pass kLookAheadLatency too, and its surplus is given
  // back by the probes.
  const bool far = min_rtt_us_ >= static_cast<double>(std::chrono::microseconds(kLookAheadLatency).count());
  const bool ahead = far && phase_ == Phase::kStartup && startup_resumes_ == 0 && connections_shrink_;
  if (ahead) looked_ahead_ = true;
  const int target = ConnectionsFor((ahead ? kConnectionLookAhead : 1.5) * bytes, MaxConnections());
  const int before = connections_;
  // A resumed start-up adds none beyond the bytes in flight once a probe
  // showed that they do not pay.
  if (startup_resumes_ > 0 && !connections_help_) {
    connections_ = std::max(connections_, ConnectionFloor(1.0));
    if (connections_ > before) rounds_since_connections_ = 0;
    return;
  }
  connections_ = std::clamp(std::max(connections_, target), 1, MaxConnections());
  if (connections_ > before) rounds_since_connections_ = 0;
}

void WindowController::Evaluate(double g, double mean_lat, double secs) {
  if (phase_ == Phase::kStartup) {
    EvaluateStartup(g, mean_lat);
  } else if (probe_ == Probe::kNone) {
    EvaluateSteady(g, mean_lat, secs);
  } else {
    EvaluateProbe(g, mean_lat);
  }
}

void WindowController::EvaluateStartup(double g, double mean_lat) {
  if (g >= best_goodput_ * kStartupGain) {
    best_goodput_ = g;
    best_window_ = window_;
    flat_intervals_ = queued_flat_intervals_ = 0;
    startup_paused_ = false;
    ++rounds_since_connections_;
    GrowConnections();  // for the bytes the grown window keeps in flight
    return;
  }
  // A flat round trip without queueing (latency within a quarter of the
  // lowest, at most 16 ms above it) is the lag of the measure: the answers
  // to what the window added arrive a round trip later, in waves that one
  // round trip's interval cuts unevenly. The window keeps growing — the
  // delay signal (OnComplete) stops it once requests queue — with
  // connections for it, and start-up ends after kStartupFlatRounds flat
  // round trips in a row (of either kind). The verdict takes the lower of
  // the smoothed latency (the last few dozen answers) and the round trip's
  // mean: a queue that lasts shows in both (one only building up at the
  // round trip's end shows in the next verdict), a hiccup of a few answers
  // only in the first, and a 16-ms limit is closer to such noise than a
  // quarter of 200 ms was.
  const double lat = std::min(srtt_us_, mean_lat);
  if (lat <= StartupDelayLimitUs()) {
    ++rounds_since_connections_;
    startup_paused_ = false;
    queued_flat_intervals_ = 0;
    GrowConnections();
    if (++flat_intervals_ < kStartupFlatRounds) return;
    EndStartup(g);
    return;
  }
  // A flat round trip with requests queueing may still be noise (or the
  // connections just asked for are still opening): hold the window and
  // judge the next one; a second in a row ends start-up. Heavy queueing
  // is a clear enough signal at once.
  const bool queueing = min_rtt_us_ > 0 && lat > kStartupQueueing * min_rtt_us_;
  if (++rounds_since_connections_ <= kConnectionOpenRounds) {
    startup_paused_ = true;  // connections still opening: wait for them
    return;
  }
  ++flat_intervals_;
  if (++queued_flat_intervals_ < 2 && !queueing && flat_intervals_ < kStartupFlatRounds) {
    startup_paused_ = true;
    return;
  }
  EndStartup(g);
}

void WindowController::EndStartup(double g) {
  phase_ = Phase::kSteady;
  startup_paused_ = false;
  best_goodput_ = std::max(best_goodput_, g);
  // Settle at the measured bandwidth-delay product plus 25% headroom: the
  // window grew one round trip past what the last verdict measured, so the
  // window itself is past the knee.
  const double bdp = best_goodput_ * (min_rtt_us_ / 1e6) / std::max(1.0, mean_bytes_);
  const double settle = mean_bytes_ > 0 && min_rtt_us_ > 0 ? std::min(1.25 * bdp, 1.25 * best_window_)
                                                           : 1.25 * best_window_;
  // Not below WindowFloor() (kMinCap requests of 110-kB samples) where the
  // window reached it: at round trips of a few milliseconds, where the
  // node's service time is most of the latency, the first round trips of a
  // cold node measure a fraction of its goodput with latencies of 3-8x the
  // lowest, and start-up ended within 30-40 ms at a window of 51-64 that
  // settled at 9, 11 or 23 (3 of 9 traced RTT-0 runs). Such a node's goodput
  // still rises a little with the window (a soft knee, requests pipelined
  // at the node), by less than the 5% a larger-window probe must gain: two
  // of the runs stayed at 13-35 requests. In 6 alternating pairs the build
  // before made 7,653-8,482 images/s (2 runs ended at 23 and 33 requests),
  // this one 8,388-8,758 (docs/benchmarks-long-rtt.md).
  const double settled = std::max(settle, static_cast<double>(std::min(window_, WindowFloor())));
  window_ = std::clamp(static_cast<int>(std::min(settled, 1e9)), o_.min_window, o_.max_window);
  // The look-ahead's surplus back (kSettledConnectionFactor), never below
  // kKeptConnections: only at the end of the start-up that looked ahead
  // (the first, on a long round trip, where the session shrinks; see
  // GrowConnections), and where the session (still) shrinks. A resumed
  // start-up asked for no surplus, and may follow a more-connections probe
  // that paid. A start-up that congestion ends (OnCongestion) keeps its
  // connections: it ended short, and resuming needs them.
  if (looked_ahead_ && startup_resumes_ == 0 && connections_shrink_) {
    const int settled = ConnectionsFor(kSettledConnectionFactor * window_ * mean_bytes_, MaxConnections());
    connections_ = std::min(connections_, std::max(settled, kKeptConnections));
  }
  next_probe_ = 0;  // up, then fewer connections (EvaluateSteady)
  ForgetStep();  // intervals off the average before start-up resumed say nothing of this one
}

void WindowController::ResumeStartup(double g, double latency_us) {
  phase_ = Phase::kStartup;
  ++startup_resumes_;
  best_goodput_ = g;
  best_window_ = window_;
  flat_intervals_ = queued_flat_intervals_ = 0;
  startup_paused_ = false;
  steady_intervals_ = 0;
  // Start-up's delay signals judge latency against the unloaded round
  // trip; steady state's estimate drifts up (1% an interval) and may have
  // followed a queue. The lowest since the path last changed (a step down
  // in goodput resets it): judged against the lowest from before a round
  // trip rose, a resumed start-up read its first round trip as queueing,
  // ended, and settled at the old round trip's bandwidth-delay product.
  // And not below `latency_us`, that of a larger window whose goodput and
  // not its latency grew (EvaluateProbe): the path's round trip. A probe may
  // pay before a rise is seen as a step (a row of intervals that lasts a
  // second): judged against the floor from before 5 -> 15 ms, a resumed
  // start-up read its first round trip as queueing, settled at the old
  // path's bandwidth-delay product, and the next probe paid again, 58 times
  // in 50 s (the model).
  min_rtt_us_ = floor_rtt_us_ = std::max(floor_rtt_us_, latency_us);
  down_reference_ = 0;
  too_few_connections_ = too_few_age_ = 0;  // a path far from full: counts judged before say little
  ForgetStep();
  restart_average_ = false;
  GrowConnections();  // for the window the probe found paying
}

void WindowController::EndStepProbe(bool restore) {
  if (restore) {
    min_rtt_us_ = std::min(min_rtt_us_, step_saved_min_us_);
    floor_rtt_us_ = std::min(floor_rtt_us_, step_saved_floor_us_);
    may_resume_ = may_resume_ && step_saved_may_resume_;
  }
  step_probe_pending_ = false;
}

void WindowController::ForgetStep() {
  step_side_ = 0;
  step_intervals_ = 0;
  step_bytes_ = step_secs_ = step_min_latency_us_ = 0;
}

void WindowController::EvaluateSteady(double g, double mean_lat, double secs) {
  // Follow slow changes (0.2 an interval). A step — steady intervals in a row
  // (probes between them aside) more than kLevelStep off the average on one
  // side, those after the first (which may straddle the step) at least
  // kLevelStepTime long — restarts the average at those after the first and
  // probes at the next interval, a larger window first after a step down. A
  // step down is a changed path (its round trip rose, a host went down, other
  // clients came), and the lowest latency becomes that of those intervals: the
  // caps, the delay signal and a resumed start-up are judged against the path
  // as it is. Before, the average took ~25 s at 200 ms to come down from
  // 800 MB/s to a path that then carried 90, and the lowest latency, drifting
  // up 1% an interval, minutes to follow 20 -> 200 ms: meanwhile the probes
  // were judged against the old level, none was kept, and the 3-BDP cap of
  // goodput x 20 ms held the window near a tenth of the new path's
  // (APathWhoseRoundTripRoseIsFilledAgain). The time keeps a node's pause of
  // under a second from passing for a step at any round trip
  // (OnlyAStepThatLastsRestartsTheGoodputAverage,
  // NodePausesAreNotAChangedPath); at short round trips the average follows
  // within about a second anyway. A step up (a host came back, other clients
  // left) restarts the average too; the latency follows down by itself.
  if (restart_average_) {
    // Congestion cut the window (OnCongestion): by at most 30%; an interval
    // lower than that measured the stall, not the cut window, and one higher
    // than the average measured answers to the window before it.
    restart_average_ = false;
    best_goodput_ = std::clamp(g, 0.7 * best_goodput_, best_goodput_);
  } else {
    // Judged against the average when the row began: the average moves
    // toward the new level (0.2 an interval), and judged against it a row
    // of 100-ms intervals died out within a second unless goodput fell to
    // under a third.
    const double reference = step_intervals_ > 0 ? step_reference_ : best_goodput_;
    const int side = g < (1.0 - kLevelStep) * reference   ? -1
                     : g > (1.0 + kLevelStep) * reference ? 1
                                                          : 0;
    if (side != step_side_) {
      ForgetStep();
      step_side_ = side;
      step_reference_ = best_goodput_;
    }
    best_goodput_ = 0.8 * best_goodput_ + 0.2 * g;
    if (side != 0 && step_intervals_++ > 0) {  // not the first interval off
      step_bytes_ += g * secs;
      step_secs_ += secs;
      step_min_latency_us_ = step_min_latency_us_ == 0 ? mean_lat : std::min(step_min_latency_us_, mean_lat);
      if (step_secs_ >= kLevelStepTime) {
        ++level_steps_;
        best_goodput_ = step_bytes_ / step_secs_;
        if (side < 0) {
          // Until the larger window probed next shows the path
          // window-limited (EvaluateProbe restores them if it does not pay).
          // (From before the first step, where a second came before any
          // probe ran after it.)
          if (!step_probe_pending_) {
            step_saved_min_us_ = min_rtt_us_;
            step_saved_floor_us_ = floor_rtt_us_;
            step_saved_may_resume_ = may_resume_;
          }
          step_probe_pending_ = true;
          min_rtt_us_ = floor_rtt_us_ = step_min_latency_us_;
          // A node that shed load after a resumed start-up (OnCongestion)
          // was the old path's: the new one may be climbed again, until
          // congestion follows a resume again.
          may_resume_ = true;
          next_probe_ = 0;  // up first: the path may have room the window no longer fills
          // Verdicts learnt against the old level say little of this path.
          connections_help_ = true;
          too_few_connections_ = too_few_age_ = 0;
        }
        ForgetStep();
        // A series of fewer-connections probes restarts from here. (The
        // smaller windows' reference forgets itself once goodput is 10%
        // below it with a longer latency: StartProbe.)
        fewer_reference_ = 0;
        steady_intervals_ = 4;
      }
    }
  }
  if (++steady_intervals_ < 5) return;
  steady_intervals_ = 0;
  baseline_ = best_goodput_;
  // Round-robin over the probes that can apply: up, fewer connections,
  // more connections, up, down. A down probe costs throughput while it
  // lasts, so it is the rarest; the first after start-up is up (start-up
  // may have ended short of the path), the second gives back what is left
  // of start-up's look-ahead (connections for 1.5x or 4x the window, asked
  // for while they were still opening; EndStartup gave back the most).
  for (int k = 0; k < 5; ++k) {
    const int kind = next_probe_++ % 5;
    if ((kind == 0 || kind == 3) && window_ < o_.max_window) return StartProbe(Probe::kWindowUp);
    // Not to within 10% of the floor: such a probe measures nothing.
    if (kind == 4 && static_cast<int>(window_ * 0.9) >= WindowFloor()) return StartProbe(Probe::kWindowDown);
    if (kind == 2 && connections_help_ && connections_ < MaxConnections() && srtt_us_ > 2.0 * min_rtt_us_) {
      return StartProbe(Probe::kConnections);
    }
    if (kind == 1 && FewerConnections() < connections_) return StartProbe(Probe::kFewerConnections);
  }
}

void WindowController::EvaluateProbe(double g, double mean_lat) {
  // Measure a probe over two intervals (the first absorbs the transition).
  ++probe_intervals_;
  if (probe_intervals_ == 1) return;
  probe_sum_ += g;
  if (probe_intervals_ == 2) {
    probe_first_ = g;
    probe_latency_us_ = mean_lat;
  }
  probe_latency_us_ = std::min(probe_latency_us_, mean_lat);
  if (probe_intervals_ < 3) return;
  const double pg = probe_sum_ / 2.0;
  bool keep = false;
  switch (probe_) {
    case Probe::kWindowUp:
    case Probe::kConnections:
      keep = pg >= baseline_ * 1.05;
      break;
    case Probe::kWindowDown:
      keep = pg >= std::max(baseline_, down_reference_) * 0.97;
      break;
    case Probe::kFewerConnections:
      // Within 3% of the goodput before the series began, not of the last
      // step: a series of 3% losses is not kept.
      keep = pg >= std::max(baseline_, fewer_reference_) * 0.97;
      break;
    case Probe::kNone:
      break;
  }
  if (step_probe_pending_) {
    // The larger window probed after a step down did not pay: the path is
    // not window-limited (a node slowed and the window's own queue grew),
    // and the lowest latency from before the step still holds. (Where the
    // first probe after the step could not be a larger window, at a user's
    // cap, the step's latency stays.)
    EndStepProbe(/*restore=*/probe_ == Probe::kWindowUp && !keep);
  }
  const bool down = probe_ == Probe::kWindowDown || probe_ == Probe::kFewerConnections;
  if (probe_ != Probe::kFewerConnections || !keep) fewer_reference_ = 0;  // the series ends
  if (keep) {
    if (probe_ == Probe::kWindowDown && baseline_ > down_reference_) {
      down_reference_ = baseline_;
      down_reference_latency_us_ = baseline_latency_us_;
    }
    best_goodput_ = std::max(pg, down ? pg : best_goodput_);
    if (probe_ == Probe::kConnections) {
      // The count before was too few: no fewer-connections probe goes back.
      too_few_connections_ = std::max(too_few_connections_, saved_connections_);
      too_few_age_ = 0;
    }
    if ((probe_ == Probe::kWindowUp || probe_ == Probe::kConnections) && may_resume_ &&
        std::min(probe_first_, g) >= baseline_ * kStartupGain) {
      // It paid as a start-up round trip does: the path is far from full
      // (start-up ended early: a timeout, a stall), and probing x1.25 at a
      // time would take tens of round trips to fill it. Climb again.
      // A larger window whose latency did not grow with it was not
      // queueing: its latency is the path's round trip. (Not after a
      // more-connections probe, which runs while requests wait: its latency
      // is mostly queue.)
      const bool unqueued = probe_ == Probe::kWindowUp && probe_latency_us_ <= kUnqueuedGrowth * baseline_latency_us_;
      probe_ = Probe::kNone;
      ResumeStartup(pg, unqueued ? probe_latency_us_ : 0);
      return;
    }
    if (probe_ == Probe::kWindowUp || probe_ == Probe::kConnections || probe_ == Probe::kFewerConnections) {
      // It helped (or cost nothing): try again soon.
      steady_intervals_ = 4;
      if (probe_ == Probe::kConnections) next_probe_ = 2;
      if (probe_ == Probe::kFewerConnections) next_probe_ = 1;
    }
  } else {
    window_ = saved_window_;
    // Connections a probe added that did not pay are given back (the
    // session parks them at once and closes them later); after a
    // more-connections probe no more are asked for.
    if (probe_ == Probe::kConnections) connections_help_ = false;
    if (probe_ == Probe::kFewerConnections) {
      too_few_connections_ = std::max(too_few_connections_, connections_);
      too_few_age_ = 0;
    }
    connections_ = std::min(saved_connections_, MaxConnections());
  }
  probe_ = Probe::kNone;
}

void WindowController::StartProbe(Probe p) {
  probe_ = p;
  probe_intervals_ = 0;
  probe_sum_ = 0;
  saved_window_ = window_;
  saved_connections_ = connections_;
  baseline_latency_us_ = srtt_us_;
  if (too_few_connections_ > 0 && ++too_few_age_ > kTooFewMemory) too_few_connections_ = too_few_age_ = 0;
  switch (p) {
    case Probe::kWindowUp:
      window_ = std::min(o_.max_window, std::max(window_ + 1, static_cast<int>(window_ * 1.25)));
      // With connections for its bytes: fewer-connections probes may have
      // taken them down to what the last window's bytes showed to need
      // (kProbeBytesPerConnection each, or more where a probe showed too
      // few), and the larger window gets that many x1.25, up to start-up's
      // kBytesPerConnection each. (Start-up's rule alone took 48 connections
      // to 121 for every such probe on the model's 200 ms path.)
      connections_ = std::max(connections_, std::min(ConnectionFloor(1.25), (connections_ * 5 + 3) / 4));
      break;
    case Probe::kWindowDown:
      // Goodput fell far below the reference while requests wait longer
      // than they did then: the path slowed (smaller windows lower the
      // latency with the goodput), and the old reference says nothing
      // about this one.
      if (baseline_ < (1.0 - kDownReferenceDrop) * down_reference_ && srtt_us_ > down_reference_latency_us_) {
        down_reference_ = 0;
      }
      // Not below WindowFloor(): what a smaller window saves there is at most
      // kFloorBytes, and on a soft knee the measure's noise costs more.
      window_ = std::max(WindowFloor(), static_cast<int>(window_ * 0.9));
      break;
    case Probe::kConnections:
      connections_ = std::min(MaxConnections(), connections_ + std::max(1, connections_ / 2));
      // More connections usually need a proportionally larger window.
      window_ = std::min(o_.max_window, static_cast<int>(window_ * 1.25));
      break;
    case Probe::kFewerConnections:
      if (fewer_reference_ == 0) fewer_reference_ = baseline_;
      connections_ = FewerConnections();
      break;
    case Probe::kNone:
      break;
  }
}

std::string WindowController::Describe() const {
  return fmt::format(
      "window {} connections {} phase {} goodput {:.1f} MB/s srtt {:.2f} ms min {:.2f} ms start-up resumed {} "
      "steps {}",
      window_, connections_, phase_ == Phase::kStartup ? "startup" : "steady", best_goodput_ / 1e6, srtt_us_ / 1000.0,
      min_rtt_us_ / 1000.0, startup_resumes_, level_steps_);
}

}  // namespace cqlstream::loader
