// Copyright (c) cqlstream authors.
//
// Batch memory. A BatchBuffer is a large virtual reservation (anonymous
// mmap with MAP_NORESERVE): its address never changes, so sample bytes can be
// received straight into it while other samples of the same batch are still
// arriving, and only the pages actually written become resident. Buffers are
// recycled through a BufferPool; a buffer coming back keeps the pages a
// typical batch needs (no page faults next time) and gives the rest back to
// the kernel (madvise(MADV_DONTNEED)).
//
// MemoryAccount tracks the bytes charged against the loader's budget: the
// resident bytes of the batch buffers taken from the pool (what they kept
// from their last use, or what was reserved in them since, whichever is
// more: a recycled buffer's unfilled pages are memory too), plus the bytes of
// buffers of their own, plus resident bytes of pooled buffers; and the most
// that total has been (MemoryAccount::peak). It is shared
// (std::shared_ptr) so that a batch released after the loader is gone still
// has somewhere to report to.
//
// Thread-safety: BufferPool and MemoryAccount are thread-safe. A BatchBuffer
// is used by one owner at a time (the loader, then the batch); Charge and
// Release touch its charge and are called by that owner only.
#ifndef CQLSTREAM_LOADER_BUFFER_POOL_H_
#define CQLSTREAM_LOADER_BUFFER_POOL_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cqlstream/status.h"
#include "util/mutex.h"

namespace cqlstream::loader {

struct MemoryAccount {
  std::atomic<int64_t> in_batches{0};      // bytes charged to live batches' buffers
  std::atomic<int64_t> pooled_resident{0}; // resident bytes of buffers in the pool
  int64_t total() const { return in_batches.load() + pooled_resident.load(); }

  // Charges new bytes to live batches (pages written, a buffer of a
  // sample's own), and notes the total they make if it is the largest yet.
  // Bytes moving between the pool and a batch are added where they go
  // before they are taken from where they were (BufferPool), so a Grow that
  // runs meanwhile counts them twice, never not at all.
  void Grow(int64_t bytes) {
    in_batches += bytes;
    const int64_t now = total();
    int64_t was = peak_.load(std::memory_order_relaxed);
    while (now > was && !peak_.compare_exchange_weak(was, now, std::memory_order_relaxed)) {
    }
  }
  // The largest total seen after a Grow, since the account was made: never
  // below the largest total charged at once, and above it by the pages of
  // each buffer moving at that moment (counted twice, above), e.g. one
  // batch's kept pages per thread releasing a batch then.
  int64_t peak() const { return peak_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> peak_{0};
};

// What a budget check counts: the memory once `incoming` more bytes (the
// requests in flight that have no place in a batch yet) have landed.
//  * Up to `into_open` of them land in the free slots of batches already
//    open: counted as new memory (some may fill pages already charged).
//  * The rest open new batches. Each takes one whole buffer, the pool's
//    with the most kept pages first (BufferPool::Acquire), then fresh ones.
//    A full batch fills min(kept, batch_bytes) of its buffer's kept pages,
//    and the incoming bytes open ceil(into_new / batch_bytes) full ones at
//    most: `reusable` is that sum over as many pooled buffers, those with
//    the most kept pages (BufferPool::Reusable). Each of `partial_batches`
//    batches (one per assembler that may open new ones: the last one it
//    opens is partly filled; and each open batch that has no buffer yet)
//    may take one of those buffers and fill little of it, so the pages the
//    incoming bytes fill are credited as min(reusable, into_new) less one
//    batch per partial batch.
//  * Charges are whole pages: each open batch (`open_batches`) and each new
//    batch (incoming bytes into new batches / batch_bytes, rounded up, plus
//    the partial ones) may add one page beyond its bytes.
//  * landed = in_batches + pooled + incoming - credit + page rounding +
//    `headroom` (bytes the caller adds, e.g. ordered mode's compaction copy).
// This holds only because in_batches charges a recycled buffer's kept pages
// from the moment it leaves the pool, whether or not its batch fills them.
// It is an upper bound up to the estimates it is given (incoming is
// counted at the mean sample size; a retried sample's batch may be an older
// one).
// `shrinkable`: the pooled bytes not credited, the only ones worth giving
// back to get under the budget (giving back pages the next batch refaults
// costs a page fault per page and saves nothing). Negative inputs count
// as 0; into_open counts as at most incoming.
struct BudgetInputs {
  int64_t in_batches = 0;
  int64_t pooled = 0;     // MemoryAccount::pooled_resident
  int64_t reusable = 0;   // BufferPool::Reusable(batch_bytes, ceil(into_new / batch_bytes))
  int64_t incoming = 0;
  int64_t into_open = 0;
  int64_t batch_bytes = 0;  // a batch at the mean sample size
  int partial_batches = 0;
  int64_t open_batches = 0;
  int64_t page = 0;  // PageRound(1)
  int64_t headroom = 0;
};
struct BudgetEstimate {
  int64_t landed = 0;
  int64_t shrinkable = 0;
};
BudgetEstimate EstimateLanded(const BudgetInputs& in);

// Bytes rounded up to whole pages (what the kernel makes resident).
size_t PageRound(size_t bytes);

// The address space reserved up front for one batch buffer, at most. The
// catalog's max_size is a hint (batch_size x max_size may be absurd or
// overflow); the loader gives a sample that does not fit in its batch's
// buffer a buffer of its own and joins them when the batch is finalized, so
// honest batches larger than this still load.
inline constexpr uint64_t kMaxBatchReservation = uint64_t{1} << 30;

// batch_size x max_size + 1 MiB, computed without overflow and capped at
// kMaxBatchReservation (non-positive arguments count as 1).
uint64_t BatchReservation(int64_t batch_size, int64_t max_size);

class BatchBuffer {
 public:
  static StatusOr<std::unique_ptr<BatchBuffer>> Reserve(size_t capacity);
  ~BatchBuffer();
  BatchBuffer(const BatchBuffer&) = delete;
  BatchBuffer& operator=(const BatchBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t capacity() const { return capacity_; }
  // Bytes that may be resident (high-water mark of what was written, in
  // whole pages).
  size_t resident() const { return resident_; }
  void Touched(size_t used) { resident_ = std::max(resident_, PageRound(used)); }
  // Gives pages beyond `keep` bytes back to the kernel.
  void Trim(size_t keep);
  // Bytes of this buffer charged to MemoryAccount::in_batches (BufferPool).
  size_t charged() const { return charged_; }

 private:
  friend class BufferPool;
  BatchBuffer(uint8_t* d, size_t c) : data_(d), capacity_(c) {}
  uint8_t* data_;
  size_t capacity_;
  size_t resident_ = 0;
  size_t charged_ = 0;
};

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  BufferPool(size_t capacity, int max_pooled, std::shared_ptr<MemoryAccount> account);
  // A buffer with at least capacity() bytes of address space (unless a
  // smaller one was given to Release: see there): the pooled one with the
  // most kept pages, else a fresh one. A recycled buffer's resident bytes
  // move from pooled_resident to in_batches.
  StatusOr<std::unique_ptr<BatchBuffer>> Acquire() EXCLUDES(mu_);
  // The first `used` bytes of `b` are (about to be) written: charges
  // in_batches for the pages they add to the bytes already charged. `b` is one of
  // the pool's buffers or one reserved for a batch larger than capacity();
  // Release gives its charge back. Called by the buffer's owner only.
  void Charge(BatchBuffer& b, size_t used);
  // Takes a buffer back after a batch of `used` bytes was released, and
  // gives its charge back to in_batches. Called by the buffer's owner (it
  // gives it up). The loader gives back only buffers of capacity() bytes or
  // more; tests give smaller ones to hand out memory when none can be
  // mapped, so Acquire's users check capacity() (the assembler does).
  void Release(std::unique_ptr<BatchBuffer> b, size_t used) EXCLUDES(mu_);
  // Unmaps pooled buffers, fewest kept pages first, until `bytes` of
  // resident memory were given back (or the pool is empty); returns the
  // bytes given back.
  int64_t Shrink(int64_t bytes) EXCLUDES(mu_);
  // Sum of min(kept bytes, per_buffer) over the `count` pooled buffers
  // with the most kept pages (those Acquire hands out first): what `count`
  // new batches of per_buffer bytes would fill of pages already resident.
  int64_t Reusable(int64_t per_buffer, int64_t count) EXCLUDES(mu_);
  size_t capacity() const { return capacity_; }
  const std::shared_ptr<MemoryAccount>& account() const { return account_; }

 private:
  const size_t capacity_;
  const int max_pooled_;
  std::shared_ptr<MemoryAccount> account_;
  Mutex mu_;
  std::vector<std::unique_ptr<BatchBuffer>> free_ GUARDED_BY(mu_);  // fewest kept pages first
  double avg_used_ GUARDED_BY(mu_) = 0;
};

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_BUFFER_POOL_H_
