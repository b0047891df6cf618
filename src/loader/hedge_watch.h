// Copyright (c) cqlstream authors.
//
// HedgeWatch: the attempts in flight in issue order, and which of them get a
// hedge now (loader/hedge_budget.h says when one may pay at all).
//
// An attempt becomes a candidate once it has been outstanding the hedge
// delay. The budget then sends its hedge, drops it (no token), or defers it:
// at the loader's window a hedge would only queue behind other requests,
// unless the attempt is stuck (outstanding HedgeBudget::kStuckFactor x the
// delay: a hung replica, a lost connection). A deferred attempt is kept,
// due at issued + kStuckFactor x delay, and asked about again then; an
// attempt dropped at the first look could never reach the stuck exception,
// and a hung replica stalled its samples until the attempt timed out.
//
// Entries are checked lazily: `live(task, attempt)` (the caller's) returns
// whether the attempt is still one to hedge (its sample unresolved, the
// attempt outstanding and the latest, no hedge yet); dead entries are
// dropped when they reach the front.
//
// Ownership: holds copies of T (the loader's weak task handles).
// Thread-safety: not thread-safe; the loader calls it under its lock.
#ifndef CQLSTREAM_LOADER_HEDGE_WATCH_H_
#define CQLSTREAM_LOADER_HEDGE_WATCH_H_

#include <chrono>
#include <cstdint>
#include <deque>

#include "loader/hedge_budget.h"

namespace cqlstream::loader {

template <class T>
class HedgeWatch {
 public:
  using Clock = std::chrono::steady_clock;
  // More entries than this without hedging (off, or no latency known yet)
  // drop the oldest.
  static constexpr size_t kMaxUnpolled = 1000000;

  struct Entry {
    Clock::time_point issued;
    T task;
    int attempt;
  };

  void Add(Entry e) { fresh_.push_back(std::move(e)); }
  bool empty() const { return fresh_.empty() && deferred_.empty(); }
  size_t size() const { return fresh_.size() + deferred_.size(); }
  size_t deferred() const { return deferred_.size(); }
  void clear() {
    fresh_.clear();
    deferred_.clear();
  }

  // Without hedging: drops dead entries at the front, and the oldest beyond
  // kMaxUnpolled.
  template <class Live>
  void Prune(Live live) {
    while (!fresh_.empty() && (!live(fresh_.front().task, fresh_.front().attempt) || fresh_.size() > kMaxUnpolled)) {
      fresh_.pop_front();
    }
  }

  // The attempts due at `now` for hedge delay `delay`, each asked of
  // `budget` (the loader has `in_flight` samples in flight of `window`);
  // `send(task)` for each hedge the budget allows.
  template <class Live, class Send>
  void Poll(Clock::time_point now, std::chrono::microseconds delay, HedgeBudget& budget, int64_t in_flight,
            int64_t window, Live live, Send send) {
    Drain(fresh_, now, delay, delay, budget, in_flight, window, live, send);
    Drain(deferred_, now, HedgeBudget::kStuckFactor * delay, delay, budget, in_flight, window, live, send);
  }

 private:
  // Entries of `q` (in issue order) outstanding at least `due_after`; a
  // deferred entry is deferred once only.
  template <class Live, class Send>
  void Drain(std::deque<Entry>& q, Clock::time_point now, std::chrono::microseconds due_after,
             std::chrono::microseconds delay, HedgeBudget& budget, int64_t in_flight, int64_t window, Live& live,
             Send& send) {
    while (!q.empty()) {
      Entry& e = q.front();
      if (!live(e.task, e.attempt)) {
        q.pop_front();
        continue;
      }
      const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(now - e.issued);
      if (waited < due_after) return;
      Entry taken = std::move(e);
      q.pop_front();
      switch (budget.Decide(in_flight, window, waited, delay)) {
        case HedgeBudget::Verdict::kSend:
          send(taken.task);
          break;
        case HedgeBudget::Verdict::kDefer:
          if (&q == &fresh_) deferred_.push_back(std::move(taken));
          break;
        case HedgeBudget::Verdict::kDrop:
          break;
      }
    }
  }

  std::deque<Entry> fresh_;     // not yet due for a first look, in issue order
  std::deque<Entry> deferred_;  // refused at the window: due when stuck, in issue order
};

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_HEDGE_WATCH_H_
