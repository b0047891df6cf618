// Copyright (c) cqlstream authors.
//
// PumpWait: how long the loader's pump thread (retries, hedges, window
// control, rates: Loader::Impl::PumpLoop) sleeps before its next tick,
// unless something wakes it sooner (a retry queued, a batch handed out).
//
// kPumpTick on a short path; on a long one a twentieth of the lowest request
// latency, at most kMaxPumpTick. Each tick is two futex calls: the timed
// wait, and a wake when the pump lets go of the loader lock (glibc
// re-takes a mutex after a condition variable's wait as contended, so its
// unlock always wakes). At 200 ms RTT the fixed 2 ms tick made 41% of the
// loader's futex calls (docs/benchmarks-long-rtt.md "Wake-ups"). What
// the ticks serve is coarse there: hedges are due after the p99 latency,
// and the window is judged over max(10 ms, one round trip) in start-up and
// max(100 ms, four round trips) in steady state, so a tick a twentieth of
// a round trip late costs at most 5% of one. A retry falls due on time
// whatever the tick: the wait ends at its due time. Memory a consumer gives
// back (a batch released) does not wake the pump: a refill held back by
// the memory budget waits for the next completion or tick, up to 10 ms
// instead of 2 on a long path, where the samples in flight take a round
// trip anyway.
//
// Thread-safety: a pure function.
#ifndef CQLSTREAM_LOADER_PUMP_TICK_H_
#define CQLSTREAM_LOADER_PUMP_TICK_H_

#include <algorithm>
#include <chrono>
#include <optional>

namespace cqlstream::loader {

inline constexpr std::chrono::milliseconds kPumpTick{2};
inline constexpr std::chrono::milliseconds kMaxPumpTick{10};

// `min_latency`: the window controller's lowest interval latency (zero
// before the first); `next_retry`: the earliest queued retry's due time.
inline std::chrono::steady_clock::duration PumpWait(std::chrono::microseconds min_latency,
                                                    std::optional<std::chrono::steady_clock::time_point> next_retry,
                                                    std::chrono::steady_clock::time_point now) {
  using D = std::chrono::steady_clock::duration;
  D wait = std::clamp<D>(min_latency / 20, kPumpTick, kMaxPumpTick);
  if (next_retry) wait = std::min(wait, std::max<D>(*next_retry - now, D::zero()));
  return wait;
}

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_PUMP_TICK_H_
