// Copyright (c) cqlstream authors.
#include "loader/decode_stream.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace cqlstream::loader {

// Recycles frame buffers: decoded batches of one stream all have the same
// size, so a handful of buffers serve the whole run without page faults.
class FramePool {
 public:
  explicit FramePool(size_t max_free) : max_free_(max_free) {}
  ~FramePool() {
    for (auto& [p, n] : free_) std::free(p);
  }

  // A buffer of at least `bytes`; its capacity in *capacity. nullptr when out of memory.
  uint8_t* Acquire(size_t bytes, size_t* capacity) {
    bytes = std::max<size_t>(64, (bytes + 63) / 64 * 64);
    {
      MutexLock l(&mu_);
      for (size_t i = 0; i < free_.size(); ++i) {
        if (free_[i].second >= bytes) {
          auto [p, n] = free_[i];
          free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
          *capacity = n;
          return p;
        }
      }
    }
    *capacity = bytes;
    return static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
  }

  void Release(uint8_t* p, size_t capacity) {
    MutexLock l(&mu_);
    if (free_.size() < max_free_) {
      free_.emplace_back(p, capacity);
      return;
    }
    std::free(p);
  }

 private:
  const size_t max_free_;
  Mutex mu_;
  std::vector<std::pair<uint8_t*, size_t>> free_ GUARDED_BY(mu_);
};

DecodedBatch::~DecodedBatch() {
  if (pixels == nullptr) return;
  if (pool) {
    pool->Release(pixels, capacity);
  } else {
    std::free(pixels);
  }
}

Stream::Stream(std::unique_ptr<Loader> loader, StreamOptions options, OnMissing on_missing)
    : loader_(std::move(loader)), options_(std::move(options)), on_missing_(on_missing) {
  if (options_.npy && loader_->dataset().label_kind == LabelKind::kTarget) npy_targets_ = options_.npy->targets;
  if (decoding()) {
    pool_ = std::make_unique<loader::DecodePool>(options_.decode_threads);
    frames_ = std::make_shared<FramePool>(static_cast<size_t>(std::max(1, options_.prefetch)) + 2);
  }
}

namespace {

// The decoding asked for must fit the dataset's sample kind (and targets).
Status CheckDecodeFits(const DatasetInfo& ds, const StreamOptions& o) {
  if (o.decode && ds.sample_kind != SampleKind::kImage) {
    return Status::InvalidArgument(fmt::format(
        "dataset '{}' holds samples of kind '{}', not images: image decoding (decode=(H, W)) cannot read them; "
        "read the raw bytes, or decode .npy arrays (decode='npy')",
        ds.name, SampleKindName(ds.sample_kind)));
  }
  if (o.npy && ds.sample_kind != SampleKind::kBlob) {
    return Status::InvalidArgument(fmt::format(
        "dataset '{}' holds samples of kind '{}': .npy decoding (decode='npy') is for datasets of kind 'blob' "
        "(cqlstream ingest --kind blob); decode images with decode=(H, W)",
        ds.name, SampleKindName(ds.sample_kind)));
  }
  if (o.npy && o.npy->targets == NpyTargets::kNpy && ds.label_kind != LabelKind::kTarget) {
    return Status::InvalidArgument(fmt::format(
        "dataset '{}' has label kind '{}': decoding targets as .npy needs label kind 'target'", ds.name,
        LabelKindName(ds.label_kind)));
  }
  return Status::OK();
}

}  // namespace

StatusOr<std::unique_ptr<Stream>> Stream::Open(LoaderOptions loader, StreamOptions options) {
  if (options.decode) CQLS_RETURN_IF_ERROR(options.decode->Validate());
  if (options.prefetch < 1 || options.prefetch > 64) {
    return Status::InvalidArgument(fmt::format("prefetch must be in 1..64, got {}", options.prefetch));
  }
  if (options.decode_threads < 0 || options.decode_threads > 256) {
    return Status::InvalidArgument(fmt::format("decode_threads must be in 0..256, got {}", options.decode_threads));
  }
  if (options.decode && options.npy) {
    return Status::InvalidArgument("a stream decodes images or .npy arrays, not both");
  }
  const OnMissing on_missing = loader.on_missing;
  CQLS_ASSIGN_OR_RETURN(std::unique_ptr<Loader> l, Loader::Open(std::move(loader)));
  CQLS_RETURN_IF_ERROR(CheckDecodeFits(l->dataset(), options));
  return std::unique_ptr<Stream>(new Stream(std::move(l), std::move(options), on_missing));
}

Stream::~Stream() { Close(); }

StatusOr<std::shared_ptr<const DecodedBatch>> Stream::DecodeNpy(const Batch& raw) {
  auto d = std::make_shared<DecodedBatch>();
  d->epoch = raw.epoch;
  d->index = raw.index;
  d->npy_mode = true;
  NpyBatchLayout l;
  int64_t skipped = 0;
  const auto t0 = std::chrono::steady_clock::now();
  Status s = DecodeNpyBatch(
      *pool_, raw, npy_targets_, on_missing_ == OnMissing::kSkip,
      [&](size_t bytes) { return frames_->Acquire(bytes, &d->capacity); }, &l, &d->pixels, &skipped);
  decode_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  if (d->pixels != nullptr) d->pool = frames_;
  if (!s.ok()) return s;
  decode_skipped_ += skipped;
  const bool multi = raw.multilabels.size() == raw.size();
  for (size_t i : l.kept) {
    d->labels.push_back(i < raw.labels.size() ? raw.labels[i] : -1);
    if (multi) d->multilabels.push_back(raw.multilabels[i]);
    d->keys.push_back(raw.keys[i]);
  }
  d->arrays = std::move(l.arrays);
  d->targets = std::move(l.targets);
  d->stacked = l.stacked;
  return std::shared_ptr<const DecodedBatch>(std::move(d));
}

StatusOr<std::shared_ptr<const DecodedBatch>> Stream::Decode(const Batch& raw) {
  if (options_.npy) return DecodeNpy(raw);
  const loader::DecodeOptions& o = *options_.decode;
  auto d = std::make_shared<DecodedBatch>();
  d->epoch = raw.epoch;
  d->index = raw.index;
  d->height = o.height;
  d->width = o.width;
  d->channels = o.channels;
  const size_t n = raw.size();
  const size_t frame = o.frame_bytes();
  d->pixels = frames_->Acquire(n * frame, &d->capacity);
  if (d->pixels == nullptr) {
    return Status::Overloaded(fmt::format("out of memory for {} decoded frames of {} bytes", n, frame));
  }
  d->pool = frames_;
  std::vector<Status> each;
  const auto t0 = std::chrono::steady_clock::now();
  Status s = loader::DecodeBatch(*pool_, raw, o, {d->pixels, n * frame}, &each);
  decode_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  if (!s.ok() && on_missing_ == OnMissing::kRaise) return s;
  const bool multi = raw.multilabels.size() == n;
  d->labels.reserve(n);
  d->keys.reserve(n);
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!each.empty() && !each[i].ok()) {
      decode_skipped_++;
      continue;
    }
    if (k != i) std::memcpy(d->pixels + k * frame, d->pixels + i * frame, frame);
    d->labels.push_back(i < raw.labels.size() ? raw.labels[i] : -1);
    if (multi) d->multilabels.push_back(raw.multilabels[i]);
    d->keys.push_back(raw.keys[i]);
    ++k;
  }
  return std::shared_ptr<const DecodedBatch>(std::move(d));
}

void Stream::Produce() {
  const size_t depth = static_cast<size_t>(std::max(1, options_.prefetch));
  for (;;) {
    {
      MutexLock l(&mu_);
      while (!stop_ && queue_.size() >= depth) cv_.Wait(&mu_);
      if (stop_) return;
    }
    StatusOr<BatchPtr> r = loader_->Next();
    Slot s;
    bool last = false;
    if (!r.ok()) {
      {
        MutexLock l(&mu_);
        if (stop_) return;
      }
      s.status = r.status();
      s.state = loader_->State();
      // A closed loader fails every call from now on.
      last = r.status().code() == Status::Code::kCancelled;
    } else if (!*r) {
      s.state = loader_->State();
      last = loader_->Done();
    } else {
      s.state = loader_->State();
      BatchPtr raw = std::move(*r);
      auto d = Decode(*raw);
      raw.reset();  // the raw bytes stop counting against the loader's budget
      if (d.ok()) {
        s.item.decoded = std::move(*d);
      } else {
        s.status = d.status();
      }
    }
    MutexLock l(&mu_);
    queue_.push_back(std::move(s));
    if (last) finished_ = true;
    cv_.SignalAll();
    if (last) return;
  }
}

StatusOr<Item> Stream::Next(const std::function<bool()>& interrupted) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto waited = [&] {
    wait_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
  };
  if (!decoding()) {
    StatusOr<BatchPtr> b = loader_->Next(interrupted);
    waited();
    if (!b.ok()) return b.status();
    Item it;
    it.raw = std::move(*b);
    return it;
  }
  MutexLock l(&mu_);
  if (stop_) return Status::Cancelled("loader closed");
  if (!started_) {
    started_ = true;
    consumer_state_ = loader_->State();
    producer_ = std::thread([this] { Produce(); });
  }
  // Woken by the producer or Close; `interrupted` (when given) is asked
  // before each wait of at most 50 ms.
  const auto empty = [this]() REQUIRES(mu_) { return !stop_ && queue_.empty() && !finished_; };
  if (!cv_.WaitWhile(&mu_, empty, interrupted)) {
    waited();
    return Status::Cancelled("interrupted");  // no item taken
  }
  waited();
  if (stop_) return Status::Cancelled("loader closed");
  if (queue_.empty()) return Item{};  // every epoch delivered
  Slot s = std::move(queue_.front());
  queue_.pop_front();
  consumer_state_ = std::move(s.state);
  cv_.SignalAll();
  if (!s.status.ok()) return s.status;
  return std::move(s.item);
}

bool Stream::Done() const {
  if (!decoding()) return loader_->Done();
  MutexLock l(&mu_);
  return finished_ && queue_.empty();
}

std::string Stream::State() {
  if (!decoding()) return loader_->State();
  MutexLock l(&mu_);
  if (!started_) return loader_->State();
  return consumer_state_;
}

Status Stream::Restore(const std::vector<std::string>& states) {
  {
    MutexLock l(&mu_);
    if (started_) return Status::InvalidArgument("a checkpoint must be restored before the first batch is read");
  }
  return loader_->Restore(states);
}

StatusOr<Item> Stream::Fetch(const std::vector<SampleKey>& keys, const std::function<bool()>& interrupted) {
  CQLS_ASSIGN_OR_RETURN(BatchPtr b, loader_->Fetch(keys, interrupted));
  Item it;
  if (!decoding() || !b) {
    it.raw = std::move(b);
    return it;
  }
  CQLS_ASSIGN_OR_RETURN(it.decoded, Decode(*b));
  return it;
}

void Stream::Close() {
  {
    MutexLock l(&mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.SignalAll();
  loader_->Close();
  if (producer_.joinable()) producer_.join();
}

}  // namespace cqlstream::loader
