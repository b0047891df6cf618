// Copyright (c) cqlstream authors.
//
// The timing model of the cqlstream-wan proxy, as pure arithmetic: no
// sockets, no threads, no clock reads. Every method takes the current time as
// an argument (the caller injects the clock), so tests drive the model with
// synthetic time and the proxy drives it with std::chrono::steady_clock.
//
// Model, per proxied TCP connection and direction (a "pipe"):
//
//   read      The proxy reads n bytes from the source at time t_read, but
//             only while the pipe has credit: in_flight + n <= W (window).
//   serialize A Link shared by every pipe of one direction serializes the
//             bytes at rate R: t_ser = max(t_read, link_free) + n/R
//             (R = 0: t_ser = t_read). Pipes queue FIFO on the link.
//   release   The bytes may be written to the sink at
//               t_rel = max(t_rel_prev, floor, t_ser + D + U[0, J])
//             so jitter J never reorders bytes; D is the one-way delay.
//   deliver   When the sink socket has taken the bytes (t_dlv >= t_rel) the
//             caller reports OnDelivered(n, t_dlv).
//   credit    The acknowledgement travels back for D: the n bytes leave
//             in_flight at t_dlv + D, one RTT (2D) after they were read when
//             the sink keeps up. A single pipe therefore moves at most W per
//             RTT, like a real TCP path whose window is W; a slow sink delays
//             the credit and backpressure reaches the source through TCP.
//   handshake SetReleaseFloor(t) keeps the first bytes from arriving earlier
//             than a TCP handshake would allow (the proxy accepts locally).
//
// The FIN of a half-closed source goes through the same path (OnEof) so it
// stays behind the data and arrives D later.
//
// Thread-safety: Link is safe for concurrent use (one Link is shared by all
// pipes of one direction, on any I/O thread). PipeModel is not thread-safe;
// it belongs to one pipe and is used by one thread at a time.
#ifndef CQLSTREAM_BENCH_WAN_WAN_MODEL_H_
#define CQLSTREAM_BENCH_WAN_WAN_MODEL_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <mutex>

namespace cqlstream::wan {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Nanos = std::chrono::nanoseconds;

inline constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

// A serialization clock: the bottleneck link of one direction, shared by all
// pipes in that direction. rate_bytes_per_sec == 0 means uncapped.
class Link {
 public:
  explicit Link(uint64_t rate_bytes_per_sec) : rate_(rate_bytes_per_sec) {}
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  uint64_t rate_bytes_per_sec() const { return rate_; }

  // Reserves the link for n bytes that arrive at `arrival` and returns the
  // time their last byte has left the link: max(arrival, busy-until) + n/R.
  // Rounding errors do not accumulate over a busy period.
  TimePoint Serialize(TimePoint arrival, uint64_t n);

 private:
  const uint64_t rate_;
  std::mutex mu_;
  TimePoint free_at_{};        // guarded by mu_
  uint64_t remainder_ns_x_rate_ = 0;  // guarded by mu_: fractional ns * rate
};

struct PipeParams {
  Nanos delay{0};             // one-way delay D
  // From `change_at` on, the one-way delay is `changed_delay` (a route
  // change in the middle of a run; negative: none). Bytes keep their order
  // and credit returns theirs when the delay falls.
  Nanos changed_delay{-1};
  TimePoint change_at{};
  Nanos jitter{0};            // extra delay, uniform in [0, J]; never reorders
  uint64_t window = kUnlimited;  // W: bytes read but not yet acknowledged

  // The one-way delay at time t (`delay`, or `changed_delay` from
  // `change_at` on).
  Nanos DelayAt(TimePoint t) const { return changed_delay.count() >= 0 && t >= change_at ? changed_delay : delay; }
};

// One direction of one proxied connection. Not thread-safe.
class PipeModel {
 public:
  // `link` may be nullptr (uncapped) and must outlive the PipeModel. `seed`
  // makes the jitter sequence reproducible.
  PipeModel(const PipeParams& params, Link* link, uint64_t seed);

  const PipeParams& params() const { return params_; }

  Nanos DelayAt(TimePoint t) const { return params_.DelayAt(t); }

  // Bytes the pipe may read at `now` (after applying every credit return due
  // by `now`); kUnlimited when the window is unlimited.
  uint64_t Credit(TimePoint now);

  // Records n bytes read from the source at `now` and returns their release
  // time (>= now, >= every earlier release time).
  // REQUIRES: n <= Credit(now); now is not earlier than any earlier call's.
  TimePoint OnRead(uint64_t n, TimePoint now);

  // Records the source's EOF at `now`; returns when the FIN may be passed on.
  TimePoint OnEof(TimePoint now);

  // n bytes were handed to the sink at `now`; their credit returns at now + D.
  // REQUIRES: n <= in_flight().
  void OnDelivered(uint64_t n, TimePoint now);

  // Earliest time at which Credit() reaches min(bytes, W), or TimePoint::max()
  // when it never will without more deliveries; a time <= now when it already
  // has.
  TimePoint TimeCreditReaches(uint64_t bytes) const;

  // No release earlier than t (used to charge the TCP handshake).
  void SetReleaseFloor(TimePoint t) { floor_ = t; }

  uint64_t in_flight() const { return in_flight_; }

 private:
  struct CreditReturn {
    TimePoint at;
    uint64_t bytes;
  };

  TimePoint Release(TimePoint serialized);
  uint64_t NextRandom();

  PipeParams params_;
  Link* link_;
  uint64_t rng_state_;
  uint64_t in_flight_ = 0;
  TimePoint last_release_{};
  TimePoint floor_{};
  std::deque<CreditReturn> returns_;  // FIFO, non-decreasing `at`
};

}  // namespace cqlstream::wan

#endif  // CQLSTREAM_BENCH_WAN_WAN_MODEL_H_
