// Copyright (c) cqlstream authors.
//
// CongestionGate: which failed requests cut the loader's window
// (loader::WindowController::OnCongestion).
//
// A timeout or an overload error is a congestion signal, heard once per
// request: a coalesced request of n samples that times out is one signal,
// not n (cutting the window 0.7^n took it to its minimum at once). And
// requests in flight when the window was cut were sent at the old window:
// their failures are the same congestion event, so only a request sent
// after the last cut cuts again (as TCP reacts once per window of data).
//
// Thread-safety: not thread-safe; the loader calls it under its lock.
#ifndef CQLSTREAM_LOADER_CONGESTION_GATE_H_
#define CQLSTREAM_LOADER_CONGESTION_GATE_H_

#include <chrono>

#include "cqlstream/status.h"

namespace cqlstream::loader {

class CongestionGate {
 public:
  using Clock = std::chrono::steady_clock;

  static bool IsCongestion(const Status& err) {
    return err.IsTimeout() || err.code() == Status::Code::kOverloaded;
  }

  // A request sent at `sent` failed at `now` with `err`: true when the
  // window is to be cut now (the cut is recorded).
  bool Admit(const Status& err, Clock::time_point sent, Clock::time_point now) {
    if (!IsCongestion(err) || sent < last_cut_) return false;
    last_cut_ = now;
    return true;
  }

 private:
  Clock::time_point last_cut_{};
};

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_CONGESTION_GATE_H_
