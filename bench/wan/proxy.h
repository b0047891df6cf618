// Copyright (c) cqlstream authors.
//
// cqlstream-wan's proxy: a user-space TCP proxy that makes loopback look like
// a long-distance path. Each mapping listens on one address and forwards every
// accepted connection to one target; each direction of each connection is a
// "pipe" timed by wan::PipeModel (see wan_model.h for the model: one-way
// delay, order-preserving jitter, a per-connection window W whose credit
// returns one RTT after sending, and a link-rate cap shared by all pipes of
// one direction across all mappings).
//
// Implementation: standalone Asio, `threads` I/O threads each with its own
// io_context; a connection lives on one thread (no locks on the data path).
// Bytes move with splice(2) through kernel pipes (socket -> pipe -> socket)
// and never enter user space: the pipes hold the bytes "on the wire" for D.
// Each pipe owns one timer armed for its earliest event (next release or the
// credit it waits for), so timers are per pipe, not per chunk. At zero delay,
// no jitter and no rate cap nothing is timed at all (pass-through). With
// zero_copy = false the bytes go through pooled user-space buffers instead
// (asynchronous reads, gather writes): same model, about twice the CPU.
//
// Ownership: Proxy owns its threads, sockets and buffers; Stop() (or the
// destructor) closes every connection abruptly and joins the threads.
//
// Thread-safety: Start() and Stop() from one controlling thread; Stats(),
// CpuSeconds() and listen_endpoints() are safe from any thread while running.
#ifndef CQLSTREAM_BENCH_WAN_PROXY_H_
#define CQLSTREAM_BENCH_WAN_PROXY_H_

#include <chrono>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "cqlstream/status.h"
#include "wan/units.h"

namespace cqlstream::wan {

struct ProxyOptions {
  std::vector<MappingSpec> mappings;    // listen port 0 = any free port
  std::chrono::nanoseconds delay{0};    // one-way delay D (RTT = 2D)
  std::chrono::nanoseconds jitter{0};   // extra one-way delay in [0, J], no reordering
  // `change_after` (>= 0) after Start, the one-way delay becomes
  // `changed_delay` for every connection, open or new (a route change, a
  // failover to a far data centre); a negative `changed_delay`: no change.
  // Bytes keep their order.
  std::chrono::nanoseconds change_after{0};
  std::chrono::nanoseconds changed_delay{-1};
  uint64_t rate_bytes_per_sec = 0;      // per direction, shared by all connections; 0 = uncapped
  uint64_t window_bytes = 4 << 20;      // per connection and direction; 0 = unlimited
  int threads = 1;                      // I/O threads
  // SO_RCVBUF / SO_SNDBUF on the proxy's own sockets (0 = kernel default
  // with autotuning). Small, so the kernel does not buffer much beyond W.
  int socket_buffer_bytes = 256 << 10;
  // Copy path: size of the pooled buffers, the largest single read. (The
  // splice path reads what a kernel pipe, min(W, 1 MiB), holds.)
  size_t read_chunk = 256 << 10;
  uint64_t seed = 1;                    // jitter sequence
  // Hold the first bytes as a TCP handshake over the emulated path would:
  // client data reaches the target no earlier than accept + 3D, target data
  // reaches the client no earlier than accept + 4D.
  bool emulate_handshake = true;
  // Move bytes with splice(2) through kernel pipes (no copies through user
  // space). false: read into and write from user-space buffers.
  bool zero_copy = true;
  // Time every byte even at zero delay, no jitter and no cap (normally such
  // a proxy is a plain pass-through). For measuring the timed path's cost.
  bool force_timed = false;
  // > 0: run the I/O threads SCHED_FIFO at this priority (best effort; see
  // Proxy::realtime()), so that on a busy machine timers fire on time and
  // the emulated path does not lengthen, as a kernel qdisc would not.
  int realtime_priority = 0;
};

// How late the delay line released bytes, counted in bytes (both directions
// of every connection of a mapping): bucket i holds bytes released up to
// kLateBucketMs[i] ms after their release time (the last bucket: later).
// With normal scheduling on a busy machine the timers fire late and the
// emulated path lengthens; these say by how much.
inline constexpr double kLateBucketMs[] = {1, 2, 5, 10, 20, 50, 100};
inline constexpr size_t kLateBuckets = std::size(kLateBucketMs) + 1;

struct MappingStats {
  std::string name;                // "LISTEN->TARGET"
  uint64_t accepted = 0;
  uint64_t active = 0;
  uint64_t connect_failures = 0;   // target refused / unreachable
  uint64_t errors = 0;             // closed by a socket error (peer reset, out of fds, ...)
  uint64_t bytes_up = 0;           // client -> target, delivered
  uint64_t bytes_down = 0;         // target -> client, delivered
  uint64_t late_bytes[kLateBuckets] = {};  // see kLateBucketMs

  // The smallest bucket bound (ms) under which at least fraction q of the
  // timed bytes were released; infinity when they fall in the last bucket,
  // 0 when nothing was timed.
  double LateQuantileMs(double q) const;
};

class Proxy {
 public:
  // Binds every listener (failing on the first that cannot bind) and starts
  // the I/O threads.
  static StatusOr<std::unique_ptr<Proxy>> Start(const ProxyOptions& options);

  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  // Closes listeners and connections, joins the threads. Idempotent.
  void Stop();

  // The bound listen addresses, in mapping order (resolves port 0).
  std::vector<HostPort> listen_endpoints() const;

  std::vector<MappingStats> Stats() const;

  // CPU time (user + system) consumed by the proxy's I/O threads so far.
  double CpuSeconds() const;

  // Whether every I/O thread got the requested realtime priority (false when
  // none was requested or the system refused).
  bool realtime() const;

  class Impl;

 private:
  explicit Proxy(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cqlstream::wan

#endif  // CQLSTREAM_BENCH_WAN_PROXY_H_
