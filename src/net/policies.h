// Copyright (c) cqlstream authors.
//
// Request policies: small objects with per-request state, in the manner of
// scylla-rust-driver.
//
//  * RetryPolicy makes a RetrySession for each request; the session sees
//    every failed attempt and decides: give up, retry on the same host, or
//    retry on the next host of the query plan, after a backoff delay.
//    Non-idempotent requests are retried only when the server said the write
//    was not applied (Unavailable, Overloaded, IsBootstrapping), never after a
//    client timeout or a lost connection, because the write may have happened.
//  * SpeculativePolicy says when to start another execution of an idempotent
//    request that has not answered yet (hedging): after a fixed delay, or after
//    an adaptive delay that follows the running p99 latency of the session.
//  * LatencyTracker keeps a decaying latency histogram for the adaptive delay.
//
// Thread-safety: policies are immutable after construction and shared by all
// requests; RetrySession objects are used by one request at a time (under
// that request's lock). LatencyTracker is thread-safe (atomics).
#ifndef CQLSTREAM_NET_POLICIES_H_
#define CQLSTREAM_NET_POLICIES_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "cqlstream/status.h"

namespace cqlstream::net {

// Exponential backoff with jitter, the one backoff of the client (retries,
// Overloaded, pool and control-connection reconnection): the delay after
// `failures` (>= 1) consecutive failures is base x 2^(failures-1), capped at
// max, then drawn uniformly from [d/2, d] so that clients that failed
// together do not come back together. Thread-safe (a thread-local generator).
class ExponentialBackoff {
 public:
  ExponentialBackoff(std::chrono::milliseconds base, std::chrono::milliseconds max) : base_(base), max_(max) {}
  std::chrono::milliseconds Delay(int failures) const;
  // The delay before jitter (the upper bound of Delay).
  std::chrono::milliseconds Ceiling(int failures) const;

 private:
  std::chrono::milliseconds base_, max_;
};

struct RetryDecision {
  enum class Kind { kGiveUp, kSameHost, kNextHost };
  Kind kind = Kind::kGiveUp;
  std::chrono::milliseconds delay{0};
};

class RetrySession {
 public:
  virtual ~RetrySession() = default;
  // `attempt` counts failed attempts so far (1 for the first failure).
  virtual RetryDecision OnError(const Status& error, bool idempotent, int attempt) = 0;
};

class RetryPolicy {
 public:
  virtual ~RetryPolicy() = default;
  virtual std::unique_ptr<RetrySession> NewSession() const = 0;
};

// Retries transient failures with exponential, jittered backoff, up to
// max_retries retries and max_total time since the first failure.
// Overloaded answers (a node shedding load; nothing was applied) have their
// own budget and a longer backoff: up to max_overload_retries, waiting
// overload_base_delay x 2^(n-1) (capped at overload_max_delay), each delay
// jittered in [d/2, d] so that the clients of a node do not come back at once.
//  - client Timeout, ConnectionLost, ConnectFailed: next host (idempotent only)
//  - Overloaded: next host, with the overload backoff above
//  - Unavailable, IsBootstrapping, ServerError(0x0000), Truncate: next host
//  - ReadTimeout / ReadFailure: same host once when enough replicas answered
//    but data was missing, else next host (idempotent)
//  - WriteTimeout / WriteFailure: next host (idempotent only)
//  - Unprepared is handled by the session (re-prepare), never seen here
//  - everything else (Syntax, Invalid, Unauthorized, AlreadyExists,
//    ConfigError, FunctionFailure, protocol errors, frame too large): give up
class DefaultRetryPolicy final : public RetryPolicy {
 public:
  struct Options {
    int max_retries = 3;
    std::chrono::milliseconds base_delay{2};
    std::chrono::milliseconds max_delay{1000};
    std::chrono::milliseconds max_total{std::chrono::seconds(30)};
    int max_overload_retries = 8;
    std::chrono::milliseconds overload_base_delay{50};
    std::chrono::milliseconds overload_max_delay{2000};
  };
  DefaultRetryPolicy() = default;
  explicit DefaultRetryPolicy(Options o) : opts_(o) {}
  std::unique_ptr<RetrySession> NewSession() const override;
  const Options& options() const { return opts_; }

 private:
  Options opts_;
};

// Never retries (tests, DDL).
class NoRetryPolicy final : public RetryPolicy {
 public:
  std::unique_ptr<RetrySession> NewSession() const override;
};

// Whether a status is worth retrying at all (transient), independent of
// idempotence. Exposed for tests and for callers with their own retry loops.
bool IsTransient(const Status& s);

// A decaying histogram of request latencies (log-spaced buckets from 50 us to
// ~100 s). Percentile() is approximate (bucket upper bound).
class LatencyTracker {
 public:
  void Record(std::chrono::microseconds latency);
  // nullopt until at least `min_samples` latencies were recorded.
  std::optional<std::chrono::microseconds> Percentile(double p, uint64_t min_samples = 100) const;
  // Halves all counts (called periodically so the histogram follows change).
  void Decay();
  uint64_t count() const;

  static constexpr int kBuckets = 96;
  static std::chrono::microseconds BucketUpper(int b);
  static int BucketOf(std::chrono::microseconds latency);

 private:
  std::array<std::atomic<uint64_t>, kBuckets> buckets_{};
  std::atomic<uint64_t> since_decay_{0};
};

class SpeculativePolicy {
 public:
  virtual ~SpeculativePolicy() = default;
  // Delay before starting execution number `executions` + 1 (executions >= 1
  // already running), or nullopt for no further execution.
  virtual std::optional<std::chrono::microseconds> NextDelay(int executions,
                                                             const LatencyTracker& latencies) const = 0;
};

// A fixed delay, up to max_executions in total.
class ConstantSpeculativePolicy final : public SpeculativePolicy {
 public:
  ConstantSpeculativePolicy(std::chrono::microseconds delay, int max_executions)
      : delay_(delay), max_(max_executions) {}
  std::optional<std::chrono::microseconds> NextDelay(int executions,
                                                     const LatencyTracker&) const override;

 private:
  std::chrono::microseconds delay_;
  int max_;
};

// Hedge after the running p-th percentile latency (default p99), clamped to
// [min_delay, max_delay]; no hedge until enough latencies were seen.
class PercentileSpeculativePolicy final : public SpeculativePolicy {
 public:
  struct Options {
    double percentile = 99.0;
    std::chrono::microseconds min_delay{1000};
    std::chrono::microseconds max_delay{std::chrono::seconds(5)};
    int max_executions = 2;
  };
  PercentileSpeculativePolicy() = default;
  explicit PercentileSpeculativePolicy(Options o) : opts_(o) {}
  std::optional<std::chrono::microseconds> NextDelay(int executions,
                                                     const LatencyTracker& latencies) const override;

 private:
  Options opts_;
};

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_POLICIES_H_
