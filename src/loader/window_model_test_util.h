// Copyright (c) cqlstream authors.
//
// Test-only: paths in fake time for WindowController's tests
// (window_test.cc: start-up and connections; window_steady_test.cc:
// steady state's probes). Pipe and Simulate: goodput and latency as a
// function of the window, step by step; PathRun and SimulatePath: request
// by request, with a node's FIFO, TCP windows per connection, connections
// that open round trips after they are asked for, refusals and congestion.
//
// Thread-safety: none (one test thread). Ownership: values only.
#ifndef CQLSTREAM_LOADER_WINDOW_MODEL_TEST_UTIL_H_
#define CQLSTREAM_LOADER_WINDOW_MODEL_TEST_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "loader/window.h"

namespace cqlstream::loader::window_model {

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
// the average goodput of the last half, *min_connections_late the fewest
// connections the controller asked for in it.
inline WindowController Simulate(const Pipe& p, double seconds, WindowController::Options o = {},
                                 double* mean_goodput = nullptr, int* max_connections = nullptr, bool shrink = true,
                                 int* min_connections_late = nullptr) {
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
      if (min_connections_late && (samples == 1 || c.connections() < *min_connections_late)) {
        *min_connections_late = c.connections();
      }
    }
  }
  if (mean_goodput) *mean_goodput = sum / std::max(1, samples);
  return c;
}

// A path in fake time, request by request: a node that serves at most
// `node_bw` bytes/s (FIFO), one TCP window of `conn_window` bytes per round
// trip per open connection, a round trip `rtt_s` (`changes` may change it,
// the node's rate, and pause the node), and connections that open 3 round
// trips after the controller asks for them (TCP, OPTIONS, STARTUP).
// Answers arrive one round trip after the node sent them, so the
// controller sees what a window did one round trip later, as in life.
struct PathRun {
  std::vector<double> bins;  // delivered bytes/s per 100 ms
  int max_window = 0;          // over the run
  int max_startup_window = 0;  // while in start-up
  int max_connections = 0;
  int final_connections = 0;
  double mean_connections_late = 0;  // the controller's count, averaged over the last half
  int min_connections_late = 0;      // the fewest it asked for in the last half
  // The largest rise of the count at one tick in the last half, as a
  // factor (1: none): a probe's connections.
  double max_connection_rise_late = 1;
  int max_connections_after_refusal = 0;  // once the controller was told the limit
  double max_node_queue_s = 0;  // longest wait at the node (start-up)
  int startup_resumes = 0;      // WindowController::startup_resumes() at the end
  int level_steps = 0;          // WindowController::level_steps() at the end
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
  // Seconds after `at` (a path change) until the first 100-ms bin from
  // which the rate holds `rate` bytes/s for a second; -1: never.
  double BackAfter(double at, double rate) const {
    for (size_t i = static_cast<size_t>(at * 10); i + 10 <= bins.size(); ++i) {
      bool holds = true;
      for (size_t k = i; k < i + 10; ++k) holds = holds && bins[k] >= rate;
      if (holds) return static_cast<double>(i) / 10.0 - at;
    }
    return -1;
  }
};

// What changes during a SimulatePath run.
struct PathChanges {
  // (time, round trip), ascending: from that time on the path's round trip is
  // the new one (a route change, a failover to a far data centre); answers
  // stay in order, as on one TCP connection.
  std::vector<std::pair<double, double>> rtt_steps;
  // (time, seconds), ascending: the node serves nothing for that long (a
  // garbage-collection pause); what it had not served yet waits.
  std::vector<std::pair<double, double>> node_pauses;
  // (time, bytes/s), ascending: from that time on the node serves at the new
  // rate (a compaction, another client's load). Requests already queued at
  // the node keep the service times of the old rate: the change takes effect
  // up to one queue later.
  std::vector<std::pair<double, double>> node_rates;
};

// `connection_limit` > 0: the node takes no more connections than that (as
// native_transport_max_connections_per_ip); the session learns it when an
// open beyond it is refused, one round trip after it was asked for, and
// then tells the controller (SetConnectionLimit), as the loader does.
// `congest_at`: times (ascending) of a timeout or an overload answer
// (OnCongestion), as a stall of the path or a node shedding load causes.
inline PathRun SimulatePath(double rtt_s, double node_bw, double conn_window, double seconds,
                            double size = 110e3, WindowController::Options o = {}, int connection_limit = 0,
                            std::vector<double> congest_at = {}, bool shrink = true, PathChanges changes = {}) {
  auto& rtt_steps = changes.rtt_steps;
  auto& node_pauses = changes.node_pauses;
  auto& node_rates = changes.node_rates;
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
    if (!rtt_steps.empty() && t >= rtt_steps.front().first) {
      rtt_s = rtt_steps.front().second;
      rtt_steps.erase(rtt_steps.begin());
    }
    if (!node_rates.empty() && t >= node_rates.front().first) {
      node_bw = node_rates.front().second;
      node_rates.erase(node_rates.begin());
    }
    if (!node_pauses.empty() && t >= node_pauses.front().first) {
      const auto [at, length] = node_pauses.front();
      node_pauses.erase(node_pauses.begin());
      // Answers the node had not sent by the pause leave it `length` later.
      for (auto& f : in_flight) {
        if (f.first > at + rtt_s / 2) f.first += length;
      }
      node_free = std::max(node_free, at) + length;
    }
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
      const double arrival = node_free + rtt_s / 2;
      in_flight.emplace_back(in_flight.empty() ? arrival : std::max(arrival, in_flight.back().first), t);
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
    if (t >= seconds / 2) {
      r.mean_connections_late += c.connections() * dt / (seconds - seconds / 2);
      if (r.min_connections_late == 0 || c.connections() < r.min_connections_late) {
        r.min_connections_late = c.connections();
      }
      if (c.connections() > before) {
        r.max_connection_rise_late = std::max(r.max_connection_rise_late,
                                              static_cast<double>(c.connections()) / std::max(before, 1));
      }
    }
  }
  r.final_connections = c.connections();
  r.startup_resumes = c.startup_resumes();
  r.level_steps = c.level_steps();
  double sum = 0;
  for (size_t i = r.bins.size() / 2; i < r.bins.size(); ++i) sum += r.bins[i];
  r.steady = sum / static_cast<double>(r.bins.size() - r.bins.size() / 2);
  return r;
}

}  // namespace cqlstream::loader::window_model

#endif  // CQLSTREAM_LOADER_WINDOW_MODEL_TEST_UTIL_H_
