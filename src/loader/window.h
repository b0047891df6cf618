// Copyright (c) cqlstream authors.
//
// WindowController: how many requests the loader keeps in flight, and how
// many connections per host it asks for, found without hand-tuning.
//
// The objective is goodput (bytes delivered per second). The controller
// climbs it:
//  * Startup: the window doubles every measurement interval while goodput
//    still rises by >= 10%. When it stops rising while requests wait far
//    longer than the fastest ones, the connections double (the path may
//    limit each connection) and the climb goes on; otherwise, or when that
//    did not pay, the window settles at the best window seen plus 25%
//    headroom. A window that reaches the user's cap (max_window) while
//    goodput still rises goes on to the connection step the same way.
//  * Steady state: it keeps probing — a larger window (x1.25) and, when
//    requests wait much longer than the fastest ones (the path, not the
//    server, is the limit: one TCP connection carries at most window/RTT),
//    more connections — keeping a change only if goodput rises by >= 5%, and
//    now and then a smaller window (x0.9), kept if goodput does not fall by
//    more than 3% (less memory for the same speed).
//  * Timeouts and overload errors shrink the window at once (x0.7).
//  * The window never exceeds 3 bandwidth-delay products (goodput x the
//    lowest latency seen): more requests only queue, mostly in the server,
//    which buffers the answers a slow path cannot take yet.
//  * Intervals in which the loader was held back by something else (the
//    consumer is slower, the byte budget is spent) are not measured.
//
// An interval lasts max(min_interval, 4 x the smoothed latency) and needs at
// least a few completions, so the measurement spans several round trips
// whatever the network's latency. At steady state the window settles near
// bandwidth x latency (the bandwidth-delay product) of the path.
//
// Thread-safety: not thread-safe; the loader calls it under its lock.
#ifndef CQLSTREAM_LOADER_WINDOW_H_
#define CQLSTREAM_LOADER_WINDOW_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace cqlstream::loader {

class WindowController {
 public:
  using Clock = std::chrono::steady_clock;
  // Connections per host the controller may open by default. One TCP
  // connection carries at most its window per round trip (Linux: 4 MiB by
  // default, tcp_wmem): 32 x 4 MiB at 200 ms is 670 MB/s. With 16, a 200 ms
  // path stopped at 335 MB/s (3,030-3,083 images/s here; 32: 3,600-4,732). Only
  // connections that pay are opened.
  static constexpr int kDefaultMaxConnections = 32;
  struct Options {
    int initial_window = 32;
    int min_window = 4;
    int max_window = 65536;
    int initial_connections = 2;
    int max_connections = kDefaultMaxConnections;
    std::chrono::milliseconds min_interval{100};
    bool adaptive = true;
  };
  enum class Phase { kStartup, kSteady };

  explicit WindowController(Options o, Clock::time_point now);

  // A request completed: `bytes` delivered, after `latency`.
  void OnComplete(int64_t bytes, std::chrono::microseconds latency);
  // A timeout or an overload error.
  void OnCongestion(Clock::time_point now);
  // The loader could not issue because of something other than the window.
  void OnHeldBack() { held_back_ = true; }
  // Periodic evaluation; returns true when window or connections changed.
  bool Tick(Clock::time_point now);

  int window() const { return window_; }
  int connections() const { return connections_; }
  Phase phase() const { return phase_; }
  double goodput() const { return best_goodput_; }  // bytes/s, best stable measurement
  std::string Describe() const;

 private:
  enum class Probe { kNone, kWindowUp, kWindowDown, kConnections };
  void StartProbe(Probe p);
  // One interval's goodput: the startup climb, the steady state's probe
  // schedule, or the verdict on a running probe.
  void Evaluate(double goodput);
  void EvaluateStartup(double goodput);
  void EvaluateSteady(double goodput);
  void EvaluateProbe(double goodput);

  Options o_;
  Phase phase_ = Phase::kStartup;
  int window_;
  int connections_;
  Clock::time_point interval_start_;
  int64_t bytes_ = 0;
  int64_t completions_ = 0;
  double srtt_us_ = 0;       // smoothed latency
  double min_rtt_us_ = 0;    // lowest smoothed-interval latency seen (decays slowly)
  double sum_latency_us_ = 0;
  bool held_back_ = false;

  double best_goodput_ = 0;
  int best_window_ = 0;
  int flat_intervals_ = 0;
  // Steady-state probing.
  Probe probe_ = Probe::kNone;
  double baseline_ = 0;   // goodput before the probe
  int saved_window_ = 0;
  int probe_intervals_ = 0;
  double probe_sum_ = 0;
  int steady_intervals_ = 0;
  int next_probe_ = 0;    // round-robin over probe kinds
  bool connections_help_ = true;
  bool startup_connection_step_ = false;  // the last startup step added connections
  double mean_bytes_ = 0;                 // per completion (smoothed)
  // The window never exceeds kBdpFactor bandwidth-delay products (goodput x
  // the lowest latency seen, in requests), nor goes below kMinCap for it.
  static constexpr double kBdpFactor = 3.0;
  static constexpr int kMinCap = 64;
};

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_WINDOW_H_
