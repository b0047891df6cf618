// Copyright (c) cqlstream authors.
#include "loader/hedge_budget.h"

#include <algorithm>

namespace cqlstream::loader {

void HedgeBudget::OnComplete(std::chrono::microseconds latency, bool hedged, bool hedge_won) {
  if (latency.count() > 0 && (min_latency_.count() == 0 || latency < min_latency_)) min_latency_ = latency;
  if (hedged) {
    if (resolved_ == kHistory) {
      wins_ -= outcomes_[next_] ? 1 : 0;
    } else {
      ++resolved_;
    }
    outcomes_[next_] = hedge_won;
    wins_ += hedge_won ? 1 : 0;
    next_ = (next_ + 1) % kHistory;
  }
  const double rate = win_rate();
  double scale = kFloorScale;
  if (rate >= kGoodWinRate) {
    scale = 1.0;
  } else if (rate > kRareWinRate) {
    scale = kFloorScale + (1.0 - kFloorScale) * (rate - kRareWinRate) / (kGoodWinRate - kRareWinRate);
  }
  tokens_ = std::min(kMaxTokens, tokens_ + kTokensPerCompletion * scale);
}

std::chrono::microseconds HedgeBudget::Delay(std::chrono::microseconds p99, std::chrono::microseconds rtt) const {
  const auto cannot_be_faster = min_latency_ + rtt;
  return std::max({p99, cannot_be_faster, std::chrono::microseconds(std::chrono::milliseconds(2))});
}

bool HedgeBudget::TryTake(int64_t in_flight, int64_t window, std::chrono::microseconds waited,
                          std::chrono::microseconds delay) {
  return Decide(in_flight, window, waited, delay) == Verdict::kSend;
}

HedgeBudget::Verdict HedgeBudget::Decide(int64_t in_flight, int64_t window, std::chrono::microseconds waited,
                                         std::chrono::microseconds delay) {
  if (tokens_ < 1.0) return Verdict::kDrop;
  if (in_flight >= window && waited < kStuckFactor * delay) return Verdict::kDefer;
  tokens_ -= 1.0;
  return Verdict::kSend;
}

double HedgeBudget::win_rate() const {
  if (resolved_ < kMinHistory) return 1.0;
  return static_cast<double>(wins_) / static_cast<double>(resolved_);
}

}  // namespace cqlstream::loader
