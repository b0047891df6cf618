// Copyright (c) cqlstream authors.
//
// Stream: the decode-ahead stream (what the Python Loader drives; usable by
// the CLI and any C++ user). It wraps a cqlstream::Loader and,
// when decoding is asked for, a pipeline that decodes batch k+1 while the
// training loop works on batch k. Two decodings exist: images (JPEG/PNG to
// fixed-size frames, StreamOptions::decode; datasets of sample kind
// "image") and .npy arrays (typed arrays of any shape, StreamOptions::npy;
// datasets of sample kind "blob", see loader/npy_batch.h). Asking for one
// on a dataset of the other kind fails at Open, naming both.
//
//   Loader::Next() --> producer thread --> DecodePool (decode + resize) -->
//   queue of at most `prefetch` decoded batches --> Stream::Next()
//
// The producer starts at the first Next() (so that Restore() can come
// before), runs across epoch boundaries (an end-of-epoch marker travels in
// the queue) and stops after the last epoch, at Close() or when the Stream
// is destroyed. Errors of Loader::Next() and of decoding travel in the queue
// too and reach the consumer at the position where they happened; the
// producer carries on after them (as Loader::Next() does).
//
// Checkpoints: Loader::State() counts what Loader::Next() handed out, which
// in decode mode runs ahead of the consumer. So the producer takes State()
// right after each Next() and the state travels with the batch; State()
// returns the state of the last batch the consumer received. Batches still
// in the queue are not counted and are read again after a restore.
//
// Decode failures (an undecodable image, a blob that is not a valid .npy
// file): with OnMissing::kRaise the batch is not delivered and its Next()
// fails with the first bad sample's key; with kSkip the bad samples are left
// out of the batch (counted in decode_skipped()).
//
// Memory: decoded frames live in buffers recycled through a small pool; a
// batch's buffer returns there when the last reference to the batch (a
// NumPy array, a tensor) is gone, also after the Stream is destroyed. The
// raw batch is released as soon as it is decoded, so it stops counting
// against the loader's byte budget.
//
// Thread-safety: Next, State, Restore and Close are for one consumer thread
// at a time; Close may also be called from another thread while Next
// blocks. Fetch and Metrics may be called from any thread. Items are
// immutable and may be read from any thread. Nothing here touches Python.
#ifndef CQLSTREAM_LOADER_DECODE_STREAM_H_
#define CQLSTREAM_LOADER_DECODE_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cqlstream/loader.h"
#include "loader/decode.h"
#include "loader/npy_batch.h"
#include "util/mutex.h"

namespace cqlstream::loader {

class FramePool;

// A decoded batch. Image mode: `pixels` holds n x height x width x
// channels uint8 frames, packed. Npy mode (npy() true): `pixels` holds the
// samples' arrays and targets as `arrays` and `targets` describe them (the
// layout of loader/npy_batch.h; height, width and channels are 0).
struct DecodedBatch {
  ~DecodedBatch();
  int64_t epoch = 0;
  int64_t index = 0;
  int height = 0, width = 0, channels = 0;
  std::vector<int32_t> labels;
  std::vector<std::vector<int32_t>> multilabels;
  std::vector<SampleKey> keys;
  uint8_t* pixels = nullptr;  // owned: returns to `pool` (or is freed) on destruction
  size_t capacity = 0;
  std::shared_ptr<FramePool> pool;
  // Npy mode only.
  bool npy_mode = false;
  std::vector<NpyItem> arrays;   // one per sample
  std::vector<NpyItem> targets;  // one per sample when the stream keeps targets, else empty
  bool stacked = false;          // arrays share dtype, shape and order and lie back to back from pixels

  bool npy() const { return npy_mode; }

  size_t size() const { return keys.size(); }
  size_t frame_bytes() const {
    return static_cast<size_t>(height) * static_cast<size_t>(width) * static_cast<size_t>(channels);
  }
};

// One step of the stream: a raw batch, a decoded batch, or the end of an epoch.
struct Item {
  BatchPtr raw;
  std::shared_ptr<const DecodedBatch> decoded;
  bool end_of_epoch() const { return !raw && !decoded; }
};

// Npy decoding: each sample's bytes are a .npy file (sample kind "blob").
struct NpyDecodeOptions {
  // Targets of label kind "target" datasets: kept as bytes (default) or
  // decoded as .npy too. kNpy on a dataset without targets fails at Open;
  // datasets without targets have none to keep.
  NpyTargets targets = NpyTargets::kBytes;
};

struct StreamOptions {
  std::optional<loader::DecodeOptions> decode;  // images; nullopt: no image decoding
  std::optional<NpyDecodeOptions> npy;          // .npy arrays; at most one of decode and npy
  int prefetch = 2;                             // decoded batches kept ready
  int decode_threads = 0;                       // 0: hardware threads
};

class Stream {
 public:
  static StatusOr<std::unique_ptr<Stream>> Open(LoaderOptions loader, StreamOptions options);
  ~Stream();  // Close()

  // Blocks until the next item (a batch or the end of the epoch).
  // `interrupted` (may be empty): as Loader::Next's (Cancelled("interrupted"),
  // no item taken; asked before each wait of at most 50 ms, no lock held).
  StatusOr<Item> Next(const std::function<bool()>& interrupted = {});
  // See "Checkpoints" above.
  std::string State();
  // REQUIRES: before the first Next().
  Status Restore(const std::vector<std::string>& states);
  // Interactive reads (Loader::Fetch), decoded when the stream decodes.
  // `interrupted` (may be empty): as Loader::Fetch's.
  StatusOr<Item> Fetch(const std::vector<SampleKey>& keys, const std::function<bool()>& interrupted = {});
  void Close();

  bool Done() const;
  const Loader& loader() const { return *loader_; }
  bool decoding() const { return options_.decode.has_value() || options_.npy.has_value(); }
  const StreamOptions& options() const { return options_; }
  int64_t decode_skipped() const { return decode_skipped_.load(); }
  double decode_seconds() const { return static_cast<double>(decode_ns_.load()) / 1e9; }
  // Time the consumer spent in Next() waiting for a batch (decode mode: for
  // a decoded one; the loader's own stall_s then counts the producer's waits).
  double wait_seconds() const { return static_cast<double>(wait_ns_.load()) / 1e9; }

 private:
  Stream(std::unique_ptr<Loader> loader, StreamOptions options, OnMissing on_missing);
  struct Slot {
    Status status;
    Item item;
    std::string state;
  };
  void Produce();
  StatusOr<std::shared_ptr<const DecodedBatch>> Decode(const Batch& raw);
  StatusOr<std::shared_ptr<const DecodedBatch>> DecodeNpy(const Batch& raw);
  // The targets npy mode keeps for this dataset (kNone without targets).
  NpyTargets npy_targets_ = NpyTargets::kNone;

  std::unique_ptr<Loader> loader_;
  const StreamOptions options_;
  const OnMissing on_missing_;
  std::unique_ptr<loader::DecodePool> pool_;
  std::shared_ptr<FramePool> frames_;
  std::atomic<int64_t> decode_skipped_{0};
  std::atomic<int64_t> decode_ns_{0};
  std::atomic<int64_t> wait_ns_{0};

  mutable Mutex mu_;
  CondVar cv_;
  std::deque<Slot> queue_ GUARDED_BY(mu_);
  bool started_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  bool finished_ GUARDED_BY(mu_) = false;  // the producer delivered the last epoch
  std::string consumer_state_ GUARDED_BY(mu_);
  std::thread producer_;
};

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_DECODE_STREAM_H_
