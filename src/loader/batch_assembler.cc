// Copyright (c) cqlstream authors.
#include "loader/batch_assembler.h"

#include <algorithm>
#include <cstring>

namespace cqlstream::loader {
namespace {

constexpr uint8_t kPending = 0, kFilled = 1, kHole = 2;

}  // namespace

// A batch under assembly, then handed out (immutable from then on).
class AssembledBatch final : public Batch {
 public:
  std::unique_ptr<BatchBuffer> buf;
  std::shared_ptr<BufferPool> pool;
  uint64_t used = 0;  // bytes reserved in buf
  // Samples that did not fit in buf at their turn (their own buffers, joined
  // into one contiguous buffer when the batch is finalized), and their bytes.
  std::vector<std::unique_ptr<BatchBuffer>> side;
  uint64_t side_bytes = 0;
  uint64_t side_charged = 0;  // their pages, charged to in_batches
  int capacity = 0, reserved = 0, completed = 0, holes = 0;
  bool sealed = false;  // out-of-order: every slot reserved
  bool tail = false;    // opened for fewer samples than a batch: the epoch's last
  int64_t build_index = 0;
  std::vector<uint64_t> seqs;
  std::vector<uint8_t> state;

  std::span<const uint8_t> data() const override { return {buf ? buf->data() : nullptr, used}; }

  ~AssembledBatch() override {
    if (pool) pool->account()->in_batches -= static_cast<int64_t>(side_charged);
    if (buf && pool) pool->Release(std::move(buf), used);  // gives buf's charge back
  }
  bool InSide(size_t k) const { return k < side.size() && side[k]; }
  // Where sample `k`'s bytes are (its side buffer, or its offset in buf).
  uint8_t* SampleData(size_t k) const { return InSide(k) ? side[k]->data() : buf->data() + offsets[k]; }
  bool Full() const { return completed + holes >= capacity; }

  void Resize(int n) {
    capacity = n;
    const size_t k = static_cast<size_t>(n);
    offsets.assign(k, 0);
    sizes.assign(k, 0);
    image_sizes.assign(k, 0);
    labels.assign(k, -1);
    keys.assign(k, 0);
    seqs.assign(k, 0);
    state.assign(k, kPending);
  }
};

std::shared_ptr<Batch> EmptyBatch(int64_t epoch) {
  auto b = std::make_shared<AssembledBatch>();
  b->epoch = epoch;
  return b;
}

BatchAssembler::BatchAssembler(Options o, uint64_t samples, std::shared_ptr<BufferPool> pool)
    : o_(o), samples_(samples), pool_(std::move(pool)), unslotted_(samples) {}

std::shared_ptr<AssembledBatch> BatchAssembler::NewBatch(int capacity, int64_t build_index, Status* err) {
  auto b = std::make_shared<AssembledBatch>();
  if (err != nullptr) {
    auto buf = pool_->Acquire();
    if (!buf.ok()) {
      *err = buf.status();
      return nullptr;
    }
    b->buf = std::move(*buf);
  }
  b->pool = pool_;
  b->Resize(capacity);
  if (o_.ordered) ordered_open_slots_ += static_cast<uint64_t>(capacity);
  b->build_index = build_index;
  b->epoch = o_.epoch;
  building_[build_index] = b;
  return b;
}

uint64_t BatchAssembler::BufferlessBatches() const {
  if (!o_.ordered) return 0;  // out-of-order batches are opened with a buffer or not at all
  uint64_t n = 0;
  for (const auto& [index, b] : building_) n += b->buf ? 0 : 1;
  return n;
}

uint64_t BatchAssembler::OpenSlots() const {
  if (o_.ordered) return ordered_open_slots_;
  return open_ ? static_cast<uint64_t>(open_->capacity - open_->reserved) : 0;
}

// Ordered mode: the batch that holds `seq`, opened on first use (the last
// one of the epoch for fewer samples). With `err` null it is opened without a
// buffer (it may only get holes for now; Place gets the buffer), so it never
// fails.
std::shared_ptr<AssembledBatch> BatchAssembler::OrderedBatch(uint64_t seq, Status* err) {
  const uint64_t B = static_cast<uint64_t>(o_.batch_size);
  const int64_t idx = static_cast<int64_t>(seq / B);
  auto it = building_.find(idx);
  if (it != building_.end()) return it->second;
  const uint64_t first = static_cast<uint64_t>(idx) * B;
  return NewBatch(static_cast<int>(std::min<uint64_t>(B, samples_ - first)), idx, err);
}

// Room for `size` bytes of slot `k`: in the batch's buffer when they fit,
// else in a buffer of their own.
Status BatchAssembler::Place(AssembledBatch& b, int slot, uint64_t size, uint8_t** data) {
  const size_t k = static_cast<size_t>(slot);
  if (!b.buf) {  // opened for holes while no memory could be had
    auto buf = pool_->Acquire();
    if (!buf.ok()) return buf.status();
    b.buf = std::move(*buf);
  }
  if (size <= b.buf->capacity() - b.used) {
    b.offsets[k] = b.used;
    *data = b.buf->data() + b.used;
    b.used += size;
    pool_->Charge(*b.buf, b.used);  // pages a recycled buffer kept are charged already
    return Status::OK();
  }
  auto side = BatchBuffer::Reserve(static_cast<size_t>(size));
  if (!side.ok()) return side.status();
  if (b.side.size() <= k) b.side.resize(static_cast<size_t>(b.capacity));
  b.offsets[k] = 0;
  *data = (*side)->data();
  b.side[k] = std::move(*side);
  b.side_bytes += size;
  const size_t pages = PageRound(static_cast<size_t>(size));
  b.side_charged += pages;
  pool_->account()->Grow(static_cast<int64_t>(pages));
  return Status::OK();
}

StatusOr<Slot> BatchAssembler::Reserve(uint64_t seq, SampleKey key, uint64_t size) {
  const uint64_t B = static_cast<uint64_t>(o_.batch_size);
  Status err;
  Slot slot;
  if (o_.ordered) {
    slot.batch = OrderedBatch(seq, &err);
    if (!slot.batch) return err;
    slot.index = static_cast<int>(seq % B);
  } else {
    if (!open_) {
      const int cap = static_cast<int>(std::min<uint64_t>(B, unslotted_));
      open_ = NewBatch(cap, batches_opened_++, &err);
      if (!open_) return err;
      open_->tail = static_cast<uint64_t>(cap) < B;
    }
    slot.batch = open_;
    slot.index = open_->reserved;
  }
  AssembledBatch& b = *slot.batch;
  CQLS_RETURN_IF_ERROR(Place(b, slot.index, size, &slot.data));
  slot.size = size;
  const size_t k = static_cast<size_t>(slot.index);
  b.reserved++;
  if (o_.ordered) ordered_open_slots_--;
  b.seqs[k] = seq;
  b.keys[k] = key;
  unslotted_--;
  if (!o_.ordered && b.reserved == b.capacity) {
    b.sealed = true;
    open_ = nullptr;
  }
  return slot;
}

AssemblyProgress BatchAssembler::Complete(Slot& slot, SampleFields fields) {
  std::shared_ptr<AssembledBatch> b = std::move(slot.batch);
  const size_t k = static_cast<size_t>(slot.index);
  b->sizes[k] = slot.size;
  b->image_sizes[k] = fields.image_size >= 0 ? static_cast<uint64_t>(fields.image_size) : slot.size;
  b->labels[k] = fields.label;
  if (fields.labels) {
    if (b->multilabels.size() != b->keys.size()) b->multilabels.resize(b->keys.size());
    b->multilabels[k] = std::move(*fields.labels);
  }
  b->state[k] = kFilled;
  b->completed++;
  resolved_++;
  slot = Slot{};
  return CheckBatch(b);
}

AssemblyProgress BatchAssembler::Fail(uint64_t seq, SampleKey key, Slot& slot, const Status& err) {
  resolved_++;
  std::shared_ptr<AssembledBatch> b = std::move(slot.batch);
  if (b) {
    b->state[static_cast<size_t>(slot.index)] = kHole;
    b->holes++;
  } else {
    unslotted_--;
    MarkUnslottedHole(seq, &b);
  }
  slot = Slot{};
  MarkDone(seq);  // resolved: a checkpoint must not read it again
  if (o_.queue_errors) errors_.emplace_back(key, err);
  return b ? CheckBatch(b) : AssemblyProgress{};
}

// A sample that failed before it had a slot: ordered mode marks its slot a
// hole; out-of-order, the open batch expects one sample fewer when fewer are
// left than it has room for. *b: the batch that changed, if any.
void BatchAssembler::MarkUnslottedHole(uint64_t seq, std::shared_ptr<AssembledBatch>* b) {
  if (o_.ordered) {
    // Opened without a buffer if need be: a hole needs no memory, and must be
    // recorded even when none can be had, or its batch would never finish.
    *b = OrderedBatch(seq, nullptr);
    const size_t k = static_cast<size_t>(seq % static_cast<uint64_t>(o_.batch_size));
    (*b)->state[k] = kHole;
    (*b)->seqs[k] = seq;
    (*b)->holes++;
    (*b)->reserved++;
    ordered_open_slots_--;
    return;
  }
  if (open_ && open_->capacity > open_->reserved + static_cast<int>(unslotted_)) {
    open_->capacity = open_->reserved + static_cast<int>(unslotted_);
    open_->tail = true;
    open_->sealed = open_->reserved == open_->capacity;
    *b = open_;
    if (open_->sealed) open_ = nullptr;
  }
}

// Moves a batch whose every slot is resolved from building to ready.
AssemblyProgress BatchAssembler::CheckBatch(const std::shared_ptr<AssembledBatch>& b) {
  AssemblyProgress p;
  if (!(o_.ordered || b->sealed) || !b->Full()) return p;
  p.batch_finished = true;
  building_.erase(b->build_index);
  Status joined = b->completed == 0 ? Status::OK() : Finalize(*b);
  if (!joined.ok()) {
    // No memory to join the batch's buffers: its samples are unreadable.
    for (int i = 0; i < b->capacity; ++i) {
      if (b->state[static_cast<size_t>(i)] != kFilled) continue;
      p.lost++;
      // Delivered as an error (or skipped), like a failed sample: done, so
      // that a checkpoint does not owe it and the watermark moves past it.
      MarkDone(b->seqs[static_cast<size_t>(i)]);
      if (o_.queue_errors) errors_.emplace_back(b->keys[static_cast<size_t>(i)], joined);
    }
    b->completed = 0;
  }
  if (b->completed == 0) {
    // Every sample failed: no batch. Ordered mode leaves a marker so that
    // delivery moves past this index.
    if (o_.ordered) ready_by_index_[b->build_index] = nullptr;
    return p;
  }
  if (o_.ordered) {
    ready_by_index_[b->build_index] = b;
  } else {
    ready_.push_back(b);
  }
  return p;
}

// Drops the holes and compacts the bytes. The order samples are presented
// in: plan order (ordered mode) or the order their bytes were placed
// (out-of-order; samples in side buffers last). In ordered mode the bytes are
// laid out in plan order so that a batch is bit-for-bit reproducible.
Status BatchAssembler::Finalize(AssembledBatch& b) {
  std::vector<int> order;
  for (int i = 0; i < b.capacity; ++i) {
    if (b.state[static_cast<size_t>(i)] == kFilled) order.push_back(i);
  }
  auto in_side = [&](int i) { return b.InSide(static_cast<size_t>(i)); };
  if (!o_.ordered) {
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
      if (in_side(x) != in_side(y)) return in_side(y);
      return b.offsets[static_cast<size_t>(x)] < b.offsets[static_cast<size_t>(y)];
    });
  }
  bool dense = b.side_bytes == 0;
  uint64_t cursor = 0;
  for (int i : order) {
    dense = dense && b.offsets[static_cast<size_t>(i)] == cursor;
    cursor += b.sizes[static_cast<size_t>(i)];
  }
  MemoryAccount& account = *pool_->account();
  if (!dense && (o_.ordered || b.side_bytes > 0)) {
    // Copy into a fresh buffer in presentation order (ordered mode's one
    // extra copy; a batch with side buffers is joined into one buffer).
    auto nb = cursor <= pool_->capacity() ? pool_->Acquire() : BatchBuffer::Reserve(static_cast<size_t>(cursor));
    if (nb.ok() && (*nb)->capacity() < cursor) {  // a smaller buffer was given to the pool (tests do)
      pool_->Release(std::move(*nb), 0);
      nb = BatchBuffer::Reserve(static_cast<size_t>(cursor));
    }
    if (!nb.ok() && b.side_bytes > 0) return nb.status();
    if (nb.ok()) {
      pool_->Charge(**nb, static_cast<size_t>(cursor));  // before the copy: the pages are written now
      uint64_t at = 0;
      for (int i : order) {
        const size_t k = static_cast<size_t>(i);
        if (b.sizes[k] > 0) std::memcpy((*nb)->data() + at, b.SampleData(k), b.sizes[k]);
        b.offsets[k] = at;
        at += b.sizes[k];
      }
      pool_->Release(std::move(b.buf), b.used);
      b.buf = std::move(*nb);
      account.in_batches -= static_cast<int64_t>(b.side_charged);
      b.used = at;
      b.side.clear();
      b.side_bytes = 0;
      b.side_charged = 0;
    }
  } else if (!dense) {
    // Out-of-order: only holes to close; moving down in offset order is safe.
    uint64_t at = 0;
    for (int i : order) {
      const size_t k = static_cast<size_t>(i);
      if (b.offsets[k] != at) std::memmove(b.buf->data() + at, b.buf->data() + b.offsets[k], b.sizes[k]);
      b.offsets[k] = at;
      at += b.sizes[k];
    }
    b.used = at;  // the pages stay resident, and charged, until the batch is released
  }
  auto pick = [&](auto& v) {
    std::remove_reference_t<decltype(v)> out;
    out.reserve(order.size());
    for (int i : order) out.push_back(std::move(v[static_cast<size_t>(i)]));
    v.swap(out);
  };
  pick(b.offsets);
  pick(b.sizes);
  pick(b.image_sizes);
  pick(b.labels);
  pick(b.keys);
  pick(b.seqs);
  if (!b.multilabels.empty()) pick(b.multilabels);
  b.state.assign(order.size(), kFilled);
  b.capacity = static_cast<int>(order.size());
  return Status::OK();
}

// Only the last batch of an epoch may be short: the tail batch (fewer
// samples left than a batch) can finish before the full batches opened ahead
// of it, so it waits until it is the epoch's last. (A batch shortened by
// failed samples is not a tail: it goes at once.)
std::shared_ptr<AssembledBatch> BatchAssembler::TakeOutOfOrder() {
  if (ready_.empty()) return nullptr;
  auto it = ready_.begin();
  if ((*it)->tail) {
    auto other = std::find_if(ready_.begin(), ready_.end(), [](const auto& r) { return !r->tail; });
    const bool more_coming = !building_.empty() || unslotted_ > 0;
    if (other != ready_.end()) {
      it = other;
    } else if (more_coming) {
      return nullptr;
    }
  }
  auto b = *it;
  ready_.erase(it);
  return b;
}

// The batch of the next index, past markers of batches whose every sample
// failed.
std::shared_ptr<AssembledBatch> BatchAssembler::TakeOrdered() {
  while (!ready_by_index_.empty() && ready_by_index_.begin()->first == next_ordered_) {
    auto b = std::move(ready_by_index_.begin()->second);
    ready_by_index_.erase(ready_by_index_.begin());
    next_ordered_++;
    if (b) return b;
  }
  return nullptr;
}

std::shared_ptr<Batch> BatchAssembler::TakeReady() {
  std::shared_ptr<AssembledBatch> b = o_.ordered ? TakeOrdered() : TakeOutOfOrder();
  if (!b) return nullptr;
  b->index = next_batch_index();
  delivered_++;
  for (uint64_t s : b->seqs) MarkDone(s);
  return b;
}

std::optional<std::pair<SampleKey, Status>> BatchAssembler::TakeError() {
  if (errors_.empty()) return std::nullopt;
  auto e = std::move(errors_.front());
  errors_.pop_front();
  return e;
}

void BatchAssembler::MarkDone(uint64_t seq) {
  if (seq == done_wm_) {
    ++done_wm_;
    while (!done_above_.empty() && *done_above_.begin() == done_wm_) {
      done_above_.erase(done_above_.begin());
      ++done_wm_;
    }
  } else if (seq > done_wm_) {
    done_above_.insert(seq);
  }
}

}  // namespace cqlstream::loader
