// Copyright (c) cqlstream authors.
//
// A budget of payload bytes held in memory by the writers of a dataset:
// what ingest's readers read ahead plus what is in flight to the server
// (IngestOptions::memory_bytes), or what the sample writer has accepted and
// not yet written (SampleWriterOptions::memory_bytes). A holder takes bytes
// before it holds a payload and gives them back once the payload's data rows
// are written (or the payload is dropped).
//
// One holding is always admitted when nothing is held, however large, so
// that a payload larger than the whole budget still moves (alone).
//
// Thread-safety: every member is safe to call from any thread.
#ifndef CQLSTREAM_STORE_BYTE_BUDGET_H_
#define CQLSTREAM_STORE_BYTE_BUDGET_H_

#include <chrono>
#include <cstdint>
#include <functional>

#include "util/mutex.h"

namespace cqlstream::store {

class ByteBudget {
 public:
  explicit ByteBudget(int64_t limit) : limit_(limit) {}
  ByteBudget(const ByteBudget&) = delete;
  ByteBudget& operator=(const ByteBudget&) = delete;

  // Takes `n` bytes when they fit, when nothing is held, or when `force`
  // (the holder must be admitted for the run to move). False: not taken.
  bool TryTake(int64_t n, bool force = false) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    if (!force && held_ > 0 && held_ + n > limit_) return false;
    held_ += n;
    return true;
  }
  // Waits until `n` bytes fit (or nothing is held), then takes them.
  void Take(int64_t n) EXCLUDES(mu_) { (void)Take(n, {}); }
  // Take, asking `interrupted` (may be empty; no lock held) before each
  // wait of at most 50 ms (CondVar::WaitWhile): once it says yes, returns
  // false with nothing taken. Bytes that fit at once are taken without
  // asking.
  bool Take(int64_t n, const std::function<bool()>& interrupted) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    if (!cv_.WaitWhile(&mu_, [this, n]() REQUIRES(mu_) { return held_ > 0 && held_ + n > limit_; }, interrupted)) {
      return false;
    }
    held_ += n;
    return true;
  }
  // Gives back `n` bytes taken before.
  void Give(int64_t n) EXCLUDES(mu_) {
    if (n == 0) return;
    MutexLock l(&mu_);
    held_ -= n;
    cv_.SignalAll();
  }
  // A holding of `from` bytes becomes `to` bytes (what was really read).
  void Adjust(int64_t from, int64_t to) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    held_ += to - from;
    if (to < from) cv_.SignalAll();
  }
  int64_t held() const EXCLUDES(mu_) {
    MutexLock l(&mu_);
    return held_;
  }
  int64_t limit() const { return limit_; }

 private:
  const int64_t limit_;
  mutable Mutex mu_;
  CondVar cv_;
  int64_t held_ GUARDED_BY(mu_) = 0;
};

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_BYTE_BUDGET_H_
