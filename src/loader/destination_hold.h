// Copyright (c) cqlstream authors.
//
// DestinationHold: whether the frame decoder may still write into the
// destination (a span of a sample's slot) that a loader sink handed out for
// its current cell. Taken when the sink hands a span out
// (Loader::Impl::Destination, AttachedDestination); let go at that cell's
// OnCell (the decoder is done with it) or OnCellAbandoned (the connection
// read its last byte into it: cql/frame_decoder.h). A sink's cells come one
// after another from one decoder, so one flag is enough: the loader's reads
// are never sent twice by the session itself (no retry policy of its own,
// no speculative executions), whose executions would share the sink.
//
// A read whose request failed while its answer arrived into the slot (a
// timeout mid-cell) keeps writing until then; so the loader puts off what
// it does about that failure while the hold is taken
// (Loader::Impl::ParkWhileWriting): another attempt's bytes, a batch
// handed out, or a buffer back in the pool would otherwise receive the rest.
//
// Thread-safety: Take, Release and held may be called from any thread;
// the decoder's writes into the span happen before a held() that reads
// false after its Release.
#ifndef CQLSTREAM_LOADER_DESTINATION_HOLD_H_
#define CQLSTREAM_LOADER_DESTINATION_HOLD_H_

#include <algorithm>
#include <atomic>
#include <iterator>

namespace cqlstream::loader {

class DestinationHold {
 public:
  void Take() { held_.store(true, std::memory_order_release); }
  void Release() { held_.store(false, std::memory_order_release); }
  bool held() const { return held_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> held_{false};
};

// Whether the decoder may still write through any of `sinks` (pointers to
// sinks that have a DestinationHold named `hold`).
template <typename Sinks>
bool AnyHeld(const Sinks& sinks) {
  return std::any_of(std::begin(sinks), std::end(sinks), [](const auto& s) { return s->hold.held(); });
}

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_DESTINATION_HOLD_H_
