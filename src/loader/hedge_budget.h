// Copyright (c) cqlstream authors.
//
// HedgeBudget: how many hedges (a second execution of a slow read on another
// replica or connection) the loader may send, and when one may pay at all.
//
// A hedge costs a whole extra read: worth it only when it delivers before
// the attempt it doubles. The budget follows what hedges have achieved:
//  * Tokens refill per completed sample: kTokensPerCompletion (1 hedge per
//    20 samples, 5%) while hedges win often, scaled down linearly as the
//    measured win rate (wins over the last kHistory resolved hedges) falls
//    from kGoodWinRate to kRareWinRate, and below that kept at a floor
//    (kFloorScale: 1 hedge per 2,000 samples) so that the rate can still be
//    learnt again when the path changes. Until kMinHistory hedges are
//    resolved the win rate is taken as good (hedging starts as before).
//    The balance is capped at kMaxTokens (a burst, not a backlog).
//  * A hedge is never sent when it cannot be faster: before the attempt has
//    been outstanding the lowest latency seen plus one round trip (a new
//    request needs at least a round trip, and the attempt cannot be late
//    before the fastest answer could be back), or when the loader is at its
//    window (the hedge would only queue behind other requests) — unless the
//    attempt has waited kStuckFactor x the hedge delay: then it is stuck (a
//    hung node, a lost connection), not queued, and only another replica can
//    deliver it before the attempt times out.
//
// A hedge "wins" when its attempt delivers the sample first; it "loses" when
// the attempt it doubled delivers first. A hedged sample that fails in both
// is neither.
//
// Thread-safety: not thread-safe; the loader calls it under its lock.
#ifndef CQLSTREAM_LOADER_HEDGE_BUDGET_H_
#define CQLSTREAM_LOADER_HEDGE_BUDGET_H_

#include <array>
#include <chrono>
#include <cstdint>

namespace cqlstream::loader {

class HedgeBudget {
 public:
  static constexpr double kTokensPerCompletion = 0.05;
  static constexpr double kInitialTokens = 10;
  static constexpr double kMaxTokens = 100;
  static constexpr int kHistory = 200;      // resolved hedges the win rate is measured over
  static constexpr int kMinHistory = 20;    // before that the rate counts as good
  static constexpr double kGoodWinRate = 0.20;
  static constexpr double kRareWinRate = 0.05;
  static constexpr double kFloorScale = 0.01;  // of kTokensPerCompletion, when wins are rare
  static constexpr int kStuckFactor = 4;

  // A sample completed after `latency` (its first delivery). `hedged`: the
  // sample had a hedge; `hedge_won`: the hedge's attempt delivered it.
  void OnComplete(std::chrono::microseconds latency, bool hedged, bool hedge_won);

  // The delay after which an attempt may be hedged: the larger of the
  // running `p99` and the lowest latency seen plus `rtt` (the path's round
  // trip, e.g. the window controller's lowest measured latency), at least
  // 2 ms.
  std::chrono::microseconds Delay(std::chrono::microseconds p99, std::chrono::microseconds rtt) const;

  // Takes a token for one hedge of an attempt outstanding for `waited`
  // (>= `delay`, from Delay) when the budget has one and the loader is not at
  // its window (`in_flight` < `window`) or the attempt is stuck (see above);
  // false otherwise.
  bool TryTake(int64_t in_flight, int64_t window, std::chrono::microseconds waited, std::chrono::microseconds delay);

  // TryTake's decision, saying why a hedge is not sent: kDefer when only the
  // window refused it (ask again once the attempt has waited kStuckFactor x
  // `delay`), kDrop when no token is left. kSend takes the token.
  enum class Verdict { kSend, kDefer, kDrop };
  Verdict Decide(int64_t in_flight, int64_t window, std::chrono::microseconds waited,
                 std::chrono::microseconds delay);

  // Wins over resolved hedges in the history (1.0 while it is too short).
  double win_rate() const;
  double tokens() const { return tokens_; }
  std::chrono::microseconds min_latency() const { return min_latency_; }

 private:
  double tokens_ = kInitialTokens;
  std::chrono::microseconds min_latency_{0};
  // Outcomes of the last kHistory resolved hedges (ring buffer).
  std::array<bool, kHistory> outcomes_{};
  int resolved_ = 0;  // outcomes recorded (up to kHistory)
  int next_ = 0;
  int wins_ = 0;      // wins among the recorded outcomes
};

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_HEDGE_BUDGET_H_
