// Copyright (c) cqlstream authors.
#include "wan/wan_model.h"

#include <algorithm>
#include <cassert>

namespace cqlstream::wan {

TimePoint Link::Serialize(TimePoint arrival, uint64_t n) {
  if (rate_ == 0) return arrival;
  std::lock_guard<std::mutex> lock(mu_);
  if (free_at_ <= arrival) {
    // The link was idle: a new busy period starts, the old fraction is moot.
    free_at_ = arrival;
    remainder_ns_x_rate_ = 0;
  }
  // duration = n * 1e9 / rate ns, carried exactly across the busy period.
  unsigned __int128 total = static_cast<unsigned __int128>(n) * 1'000'000'000u + remainder_ns_x_rate_;
  auto ns = static_cast<uint64_t>(total / rate_);
  remainder_ns_x_rate_ = static_cast<uint64_t>(total % rate_);
  free_at_ += Nanos(ns);
  return free_at_;
}

PipeModel::PipeModel(const PipeParams& params, Link* link, uint64_t seed)
    : params_(params), link_(link), rng_state_(seed ^ 0x9e3779b97f4a7c15ull) {
  if (params_.window == 0) params_.window = kUnlimited;
}

uint64_t PipeModel::NextRandom() {
  // splitmix64: tiny, fast and reproducible across platforms.
  uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t PipeModel::Credit(TimePoint now) {
  while (!returns_.empty() && returns_.front().at <= now) {
    in_flight_ -= returns_.front().bytes;
    returns_.pop_front();
  }
  if (params_.window == kUnlimited) return kUnlimited;
  return in_flight_ >= params_.window ? 0 : params_.window - in_flight_;
}

TimePoint PipeModel::Release(TimePoint serialized) {
  Nanos extra = DelayAt(serialized);
  if (params_.jitter.count() > 0) {
    auto span = static_cast<uint64_t>(params_.jitter.count()) + 1;
    extra += Nanos(static_cast<int64_t>(NextRandom() % span));
  }
  TimePoint t = std::max({last_release_, floor_, serialized + extra});
  last_release_ = t;
  return t;
}

TimePoint PipeModel::OnRead(uint64_t n, TimePoint now) {
  assert(params_.window == kUnlimited || in_flight_ + n <= params_.window);
  in_flight_ += n;
  TimePoint serialized = link_ != nullptr ? link_->Serialize(now, n) : now;
  return Release(serialized);
}

TimePoint PipeModel::OnEof(TimePoint now) {
  TimePoint serialized = link_ != nullptr ? link_->Serialize(now, 0) : now;
  return Release(serialized);
}

void PipeModel::OnDelivered(uint64_t n, TimePoint now) {
  assert(n <= in_flight_);
  const Nanos d = DelayAt(now);
  if (d.count() == 0 && returns_.empty()) {
    in_flight_ -= n;
    return;
  }
  // Not before a return queued earlier (the delay may have fallen since).
  returns_.push_back({returns_.empty() ? now + d : std::max(returns_.back().at, now + d), n});
}

TimePoint PipeModel::TimeCreditReaches(uint64_t bytes) const {
  uint64_t want = std::min(bytes, params_.window);
  if (params_.window == kUnlimited) return TimePoint::min();
  uint64_t credit = in_flight_ >= params_.window ? 0 : params_.window - in_flight_;
  if (credit >= want) return TimePoint::min();
  for (const CreditReturn& r : returns_) {
    credit += r.bytes;
    if (credit >= want) return r.at;
  }
  return TimePoint::max();
}

}  // namespace cqlstream::wan
