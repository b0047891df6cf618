// Copyright (c) cqlstream authors.
//
// FaultProxy: a TCP proxy between a client and the real node that injects
// faults into the byte stream, for tests of retries and exactly-once delivery:
// delays (without reordering), connection resets, truncation (a chunk cut short
// and the connection closed), duplicated chunks (which corrupt the CQL stream:
// the client must detect it and reconnect) and black holes (a connection that
// stops forwarding, so requests time out).
//
// Faults are drawn per CQL frame sent by the server (responses): a
// duplicate is a whole frame sent twice (a replayed answer), a truncation cuts
// a frame short and closes the connection, a stall sends a frame's start and
// the rest later. Besides, a connection may be given
// a byte budget (reset_after_min/max_bytes): after a uniformly drawn number of
// bytes sent to the client it is cut there, mid-frame as a rule, and closed
// (a link that fails every few MB); each new connection draws its own.
//
// Thread-safety: SetFaults, ResetAll and stats are thread-safe. The proxy
// runs on its own thread until destroyed.
#ifndef CQLSTREAM_TESTS_INTEGRATION_FAULT_PROXY_H_
#define CQLSTREAM_TESTS_INTEGRATION_FAULT_PROXY_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace cqlstream::testing {

class FaultProxy {
 public:
  struct Faults {
    double delay_p = 0;                         // probability a chunk is held back
    std::chrono::milliseconds delay_max{0};     // uniformly up to this
    double reset_p = 0;                         // close both sides
    double truncate_p = 0;                      // forward half the frame, then close
    double duplicate_p = 0;                     // forward the frame twice
    double blackhole_p = 0;                     // stop forwarding this connection
    // Forward the frame's header and first 4 body bytes, hold the rest for
    // stall_for, then go on (an answer that outlives its request's timeout
    // mid-frame; later frames of the connection wait behind it).
    double stall_p = 0;
    std::chrono::milliseconds stall_for{0};
    // When max > 0: each connection is cut after a uniform draw in [min, max]
    // bytes sent to the client (counted in resets).
    uint64_t reset_after_min_bytes = 0, reset_after_max_bytes = 0;
  };
  struct Stats {
    std::atomic<uint64_t> connections{0}, delays{0}, resets{0}, truncations{0}, duplicates{0}, blackholes{0},
        stalls{0};
  };

  // Listens on listen_host:port and forwards to target_host:port.
  FaultProxy(const std::string& listen_host, const std::string& target_host, uint16_t port);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  bool ok() const;                 // listening
  std::string error() const;
  void SetFaults(const Faults& f);
  void ResetAll();                 // closes every proxied connection now
  const Stats& stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace cqlstream::testing

#endif  // CQLSTREAM_TESTS_INTEGRATION_FAULT_PROXY_H_
