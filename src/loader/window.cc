// Copyright (c) cqlstream authors.
#include "loader/window.h"

#include <fmt/format.h>

#include <algorithm>

namespace cqlstream::loader {

WindowController::WindowController(Options o, Clock::time_point now)
    : o_(o),
      window_(std::clamp(o.initial_window, o.min_window, o.max_window)),
      connections_(std::clamp(o.initial_connections, 1, std::max(1, o.max_connections))),
      interval_start_(now) {
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
}

void WindowController::OnCongestion(Clock::time_point now) {
  if (!o_.adaptive) return;
  window_ = std::max(o_.min_window, static_cast<int>(window_ * 0.7));
  if (phase_ == Phase::kStartup) {
    phase_ = Phase::kSteady;
    best_window_ = window_;
  }
  probe_ = Probe::kNone;
  // Start a fresh measurement at the new window.
  interval_start_ = now;
  bytes_ = completions_ = 0;
  sum_latency_us_ = 0;
  held_back_ = false;
}

bool WindowController::Tick(Clock::time_point now) {
  if (!o_.adaptive) return false;
  const auto elapsed = now - interval_start_;
  // Startup measures over 2 smoothed latencies (it only needs to see a
  // doubling pay), steady-state probes over 4 (they look for 5% gains).
  const double lats = phase_ == Phase::kStartup ? 2.0 : 4.0;
  const auto min_len = std::max<std::chrono::microseconds>(
      o_.min_interval, std::chrono::microseconds(static_cast<int64_t>(lats * srtt_us_)));
  if (elapsed < min_len || completions_ < 8) return false;
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
  // drifts up slowly so that a changed path is eventually accepted.
  min_rtt_us_ = min_rtt_us_ == 0 ? mean_lat : std::min(mean_lat, min_rtt_us_ * 1.01);
  if (held) return false;  // not limited by the window: nothing to learn
  const int w0 = window_, c0 = connections_;
  Evaluate(goodput);
  // Requests beyond a few bandwidth-delay products only wait in queues —
  // mostly the server's: a node buffers the answers a slow path cannot take
  // yet (a 1 GiB Cassandra node ran out of direct memory at 100 ms RTT
  // before this cap, with ~1 GB of answers queued for its clients).
  const double bdp = std::max(best_goodput_, goodput) * (min_rtt_us_ / 1e6) / std::max(1.0, mean_bytes_);
  const int floor = std::min(std::max(o_.min_window, kMinCap), o_.max_window);  // a user cap may be below 64
  const int cap = std::clamp(static_cast<int>(std::min(kBdpFactor * bdp, 1e9)), floor, o_.max_window);
  window_ = std::min(window_, cap);
  return window_ != w0 || connections_ != c0;
}

void WindowController::Evaluate(double g) {
  if (phase_ == Phase::kStartup) {
    EvaluateStartup(g);
  } else if (probe_ == Probe::kNone) {
    EvaluateSteady(g);
  } else {
    EvaluateProbe(g);
  }
}

void WindowController::EvaluateStartup(double g) {
  if (g >= best_goodput_ * 1.10) {
    best_goodput_ = g;
    best_window_ = window_;
    flat_intervals_ = 0;
    startup_connection_step_ = false;  // it paid (or there was none)
    if (window_ < o_.max_window) {
      window_ = std::min(o_.max_window, window_ * 2);
      return;
    }
    // The window is at the user's cap (--max-in-flight) and the last step
    // still paid: only connections can raise goodput further, so go on
    // as if the window had stopped paying.
  } else {
    // One flat interval may be noise; heavy queueing (4x the fastest
    // latency) is a clear enough signal.
    const bool queueing = srtt_us_ > 4.0 * min_rtt_us_;
    if (++flat_intervals_ < 2 && !queueing) return;
  }
  // A larger window stopped paying. If requests now wait far longer than
  // the fastest ones, the path may be what limits each connection (one TCP
  // connection carries at most its window per round trip): double the
  // connections, keep the window, and go on climbing. A step that does
  // not pay ends it (a busy server also makes requests wait; connections
  // cannot help there).
  if (startup_connection_step_) {
    connections_help_ = false;
  } else if (connections_help_ && connections_ < o_.max_connections && srtt_us_ > 2.0 * min_rtt_us_) {
    connections_ = std::min(o_.max_connections, connections_ * 2);
    startup_connection_step_ = true;
    flat_intervals_ = 0;
    return;
  }
  phase_ = Phase::kSteady;
  window_ = std::clamp(static_cast<int>(best_window_ * 1.25), o_.min_window, o_.max_window);
  best_goodput_ = std::max(best_goodput_, g);
}

void WindowController::EvaluateSteady(double g) {
  best_goodput_ = 0.8 * best_goodput_ + 0.2 * g;  // follow slow changes
  if (++steady_intervals_ < 5) return;
  steady_intervals_ = 0;
  baseline_ = best_goodput_;
  // Round-robin over the probes that can apply: up, connections, up, down.
  // A down probe costs throughput while it lasts, so it is the rarest.
  for (int k = 0; k < 4; ++k) {
    const int kind = next_probe_++ % 4;
    if ((kind == 0 || kind == 2) && window_ < o_.max_window) return StartProbe(Probe::kWindowUp);
    if (kind == 3 && window_ > o_.min_window) return StartProbe(Probe::kWindowDown);
    if (kind == 1 && connections_help_ && connections_ < o_.max_connections && srtt_us_ > 2.0 * min_rtt_us_) {
      return StartProbe(Probe::kConnections);
    }
  }
}

void WindowController::EvaluateProbe(double g) {
  // Measure a probe over two intervals (the first absorbs the transition).
  ++probe_intervals_;
  if (probe_intervals_ == 1) return;
  probe_sum_ += g;
  if (probe_intervals_ < 3) return;
  const double pg = probe_sum_ / 2.0;
  bool keep = false;
  switch (probe_) {
    case Probe::kWindowUp:
    case Probe::kConnections:
      keep = pg >= baseline_ * 1.05;
      break;
    case Probe::kWindowDown:
      keep = pg >= baseline_ * 0.97;
      break;
    case Probe::kNone:
      break;
  }
  if (keep) {
    best_goodput_ = std::max(pg, probe_ == Probe::kWindowDown ? pg : best_goodput_);
    if (probe_ == Probe::kWindowUp || probe_ == Probe::kConnections) {
      // It helped: try again soon.
      steady_intervals_ = 4;
      if (probe_ == Probe::kConnections) next_probe_ = 1;
    }
  } else {
    window_ = saved_window_;
    // Connections stay open (closing them would cost more than it saves);
    // stop asking for more.
    if (probe_ == Probe::kConnections) connections_help_ = false;
  }
  probe_ = Probe::kNone;
}

void WindowController::StartProbe(Probe p) {
  probe_ = p;
  probe_intervals_ = 0;
  probe_sum_ = 0;
  saved_window_ = window_;
  switch (p) {
    case Probe::kWindowUp:
      window_ = std::min(o_.max_window, std::max(window_ + 1, static_cast<int>(window_ * 1.25)));
      break;
    case Probe::kWindowDown:
      window_ = std::max(o_.min_window, static_cast<int>(window_ * 0.9));
      break;
    case Probe::kConnections:
      connections_ = std::min(o_.max_connections, connections_ + std::max(1, connections_ / 2));
      // More connections usually need a proportionally larger window.
      window_ = std::min(o_.max_window, static_cast<int>(window_ * 1.25));
      break;
    case Probe::kNone:
      break;
  }
}

std::string WindowController::Describe() const {
  return fmt::format("window {} connections {} phase {} goodput {:.1f} MB/s srtt {:.2f} ms min {:.2f} ms", window_,
                     connections_, phase_ == Phase::kStartup ? "startup" : "steady", best_goodput_ / 1e6,
                     srtt_us_ / 1000.0, min_rtt_us_ / 1000.0);
}

}  // namespace cqlstream::loader
