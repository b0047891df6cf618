// Copyright (c) cqlstream authors.
#include "net/policies.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "cqlstream/errors.h"

namespace cqlstream::net {
namespace {

using Kind = RetryDecision::Kind;

std::chrono::milliseconds Backoff(std::chrono::milliseconds base, std::chrono::milliseconds max, int attempt) {
  return ExponentialBackoff(base, max).Delay(attempt);
}
std::chrono::milliseconds Backoff(const DefaultRetryPolicy::Options& o, int attempt) {
  return Backoff(o.base_delay, o.max_delay, attempt);
}

class DefaultRetrySession final : public RetrySession {
 public:
  explicit DefaultRetrySession(const DefaultRetryPolicy::Options& o) : o_(o) {}

  RetryDecision OnError(const Status& error, bool idempotent, int attempt) override {
    const auto now = std::chrono::steady_clock::now();
    if (attempt == 1) first_failure_ = now;
    if (now - first_failure_ > o_.max_total) return {Kind::kGiveUp, {}};
    if (error.code() == Status::Code::kOverloaded) {
      // The node refused the request (nothing applied) to shed load: back
      // off longer and more often than for other failures, with its own
      // budget, so that a node at its in-flight limit sees the load drop.
      if (++overloads_ > o_.max_overload_retries) return {Kind::kGiveUp, {}};
      return {Kind::kNextHost, Backoff(o_.overload_base_delay, o_.overload_max_delay, overloads_)};
    }
    // Failures other than Overloaded so far (`attempt` counts all of them).
    const int n = std::max(1, attempt - overloads_);
    if (n > o_.max_retries) return {Kind::kGiveUp, {}};
    const auto next = [&] { return RetryDecision{Kind::kNextHost, Backoff(o_, n)}; };
    switch (error.code()) {
      case Status::Code::kTimeout:
      case Status::Code::kConnectionLost:
        return idempotent ? next() : RetryDecision{};
      case Status::Code::kConnectFailed:
        // Nothing was sent: safe for any request.
        return next();
      default:
        break;
    }
    const ServerError* e = error.server_error();
    if (e == nullptr) return {Kind::kGiveUp, {}};
    switch (e->typed()) {
      case ServerErrorCode::kUnavailable:
      case ServerErrorCode::kIsBootstrapping:
      case ServerErrorCode::kServerError:
      case ServerErrorCode::kTruncateError:
        return next();
      case ServerErrorCode::kReadTimeout:
      case ServerErrorCode::kReadFailure:
        if (!idempotent) return {};
        if (!same_host_used_ && e->alive >= e->required && !e->data_present) {
          same_host_used_ = true;
          return {Kind::kSameHost, Backoff(o_, n)};
        }
        return next();
      case ServerErrorCode::kWriteTimeout:
      case ServerErrorCode::kWriteFailure:
        return idempotent ? next() : RetryDecision{};
      default:
        return {Kind::kGiveUp, {}};
    }
  }

 private:
  DefaultRetryPolicy::Options o_;
  std::chrono::steady_clock::time_point first_failure_{};
  int overloads_ = 0;  // Overloaded failures so far
  bool same_host_used_ = false;
};

class NoRetrySession final : public RetrySession {
 public:
  RetryDecision OnError(const Status&, bool, int) override { return {}; }
};

}  // namespace

std::chrono::milliseconds ExponentialBackoff::Ceiling(int failures) const {
  double d = static_cast<double>(base_.count()) * std::pow(2.0, std::clamp(failures - 1, 0, 30));
  d = std::min(d, static_cast<double>(max_.count()));
  return std::chrono::milliseconds(static_cast<int64_t>(d));
}

std::chrono::milliseconds ExponentialBackoff::Delay(int failures) const {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const double d = static_cast<double>(Ceiling(failures).count());
  std::uniform_real_distribution<double> u(0.5, 1.0);
  return std::chrono::milliseconds(static_cast<int64_t>(d * u(rng)));
}

std::unique_ptr<RetrySession> DefaultRetryPolicy::NewSession() const {
  return std::make_unique<DefaultRetrySession>(opts_);
}

std::unique_ptr<RetrySession> NoRetryPolicy::NewSession() const { return std::make_unique<NoRetrySession>(); }

bool IsTransient(const Status& s) {
  DefaultRetrySession probe(DefaultRetryPolicy::Options{});
  return probe.OnError(s, /*idempotent=*/true, 1).kind != Kind::kGiveUp;
}

// --- LatencyTracker ----------------------------------------------------------
// Bucket b covers latencies up to 50 us * 2^(b/6): six buckets per doubling
// (~12% resolution) from 50 us to 50 us * 2^16 ~ 3.3 s ... and beyond.

std::chrono::microseconds LatencyTracker::BucketUpper(int b) {
  return std::chrono::microseconds(static_cast<int64_t>(50.0 * std::pow(2.0, b / 6.0)));
}

int LatencyTracker::BucketOf(std::chrono::microseconds latency) {
  const double us = std::max<double>(1.0, static_cast<double>(latency.count()));
  int b = static_cast<int>(std::ceil(6.0 * std::log2(us / 50.0)));
  return std::clamp(b, 0, kBuckets - 1);
}

void LatencyTracker::Record(std::chrono::microseconds latency) {
  buckets_[static_cast<size_t>(BucketOf(latency))].fetch_add(1, std::memory_order_relaxed);
  since_decay_.fetch_add(1, std::memory_order_relaxed);
}

uint64_t LatencyTracker::count() const {
  uint64_t n = 0;
  for (const auto& b : buckets_) n += b.load(std::memory_order_relaxed);
  return n;
}

std::optional<std::chrono::microseconds> LatencyTracker::Percentile(double p, uint64_t min_samples) const {
  std::array<uint64_t, kBuckets> snap;
  uint64_t total = 0;
  for (size_t i = 0; i < snap.size(); ++i) {
    snap[i] = buckets_[i].load(std::memory_order_relaxed);
    total += snap[i];
  }
  if (total == 0 || total < min_samples) return std::nullopt;
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(total);
  uint64_t seen = 0;
  for (size_t i = 0; i < snap.size(); ++i) {
    seen += snap[i];
    if (static_cast<double>(seen) >= rank) return BucketUpper(static_cast<int>(i));
  }
  return BucketUpper(kBuckets - 1);
}

void LatencyTracker::Decay() {
  for (auto& b : buckets_) {
    uint64_t v = b.load(std::memory_order_relaxed);
    while (!b.compare_exchange_weak(v, v / 2, std::memory_order_relaxed)) {
    }
  }
  since_decay_.store(0, std::memory_order_relaxed);
}

// --- Speculative execution ------------------------------------------------------

std::optional<std::chrono::microseconds> ConstantSpeculativePolicy::NextDelay(int executions,
                                                                             const LatencyTracker&) const {
  if (executions >= max_) return std::nullopt;
  return delay_;
}

std::optional<std::chrono::microseconds> PercentileSpeculativePolicy::NextDelay(
    int executions, const LatencyTracker& latencies) const {
  if (executions >= opts_.max_executions) return std::nullopt;
  auto p = latencies.Percentile(opts_.percentile);
  if (!p) return std::nullopt;
  return std::clamp(*p, opts_.min_delay, opts_.max_delay);
}

}  // namespace cqlstream::net
