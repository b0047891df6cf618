// Copyright (c) cqlstream authors.
#include "loader/buffer_pool.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace cqlstream::loader {
namespace {

size_t PageSize() {
  static const size_t p = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return p;
}
size_t RoundUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

uint64_t BatchReservation(int64_t batch_size, int64_t max_size) {
  constexpr uint64_t kSlack = uint64_t{1} << 20;
  const uint64_t per = static_cast<uint64_t>(std::max<int64_t>(max_size, 1));
  const uint64_t b = static_cast<uint64_t>(std::max<int64_t>(batch_size, 1));
  if (per > (kMaxBatchReservation - kSlack) / b) return kMaxBatchReservation;
  return b * per + kSlack;
}

BudgetEstimate EstimateLanded(int64_t in_batches, int64_t pooled_resident, int64_t incoming, int64_t into_open) {
  pooled_resident = std::max<int64_t>(pooled_resident, 0);
  incoming = std::max<int64_t>(incoming, 0);
  into_open = std::clamp<int64_t>(into_open, 0, incoming);
  const int64_t into_new = incoming - into_open;
  return {std::max<int64_t>(in_batches, 0) + std::max(pooled_resident + into_open, incoming),
          std::max<int64_t>(pooled_resident - into_new, 0)};
}

StatusOr<std::unique_ptr<BatchBuffer>> BatchBuffer::Reserve(size_t capacity) {
  const size_t cap = RoundUp(std::max<size_t>(capacity, 1), PageSize());
  void* p = ::mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return Status::Overloaded(
        fmt::format("cannot reserve {} bytes of address space for a batch: {}", cap, std::strerror(errno)));
  }
  return std::unique_ptr<BatchBuffer>(new BatchBuffer(static_cast<uint8_t*>(p), cap));
}

BatchBuffer::~BatchBuffer() { ::munmap(data_, capacity_); }

void BatchBuffer::Trim(size_t keep) {
  const size_t k = RoundUp(keep, PageSize());
  if (k >= resident_) return;
  ::madvise(data_ + k, RoundUp(resident_, PageSize()) - k, MADV_DONTNEED);
  resident_ = k;
}

BufferPool::BufferPool(size_t capacity, int max_pooled, std::shared_ptr<MemoryAccount> account)
    : capacity_(capacity), max_pooled_(max_pooled), account_(std::move(account)) {}

StatusOr<std::unique_ptr<BatchBuffer>> BufferPool::Acquire() {
  {
    MutexLock l(&mu_);
    if (!free_.empty()) {
      auto b = std::move(free_.back());
      free_.pop_back();
      account_->pooled_resident -= static_cast<int64_t>(b->resident());
      b->charged_ = b->resident();
      account_->in_batches += static_cast<int64_t>(b->charged_);
      return b;
    }
  }
  return BatchBuffer::Reserve(capacity_);
}

void BufferPool::Charge(BatchBuffer& b, size_t used) {
  b.Touched(used);
  if (used <= b.charged_) return;
  account_->in_batches += static_cast<int64_t>(used - b.charged_);
  b.charged_ = used;
}

void BufferPool::Release(std::unique_ptr<BatchBuffer> b, size_t used) {
  b->Touched(used);
  const auto charged = static_cast<int64_t>(b->charged_);
  b->charged_ = 0;
  {
    MutexLock l(&mu_);
    avg_used_ = avg_used_ == 0 ? static_cast<double>(used) : 0.9 * avg_used_ + 0.1 * static_cast<double>(used);
    if (static_cast<int>(free_.size()) < max_pooled_) {
      // Keep what a typical batch needs resident; give the rest back.
      b->Trim(static_cast<size_t>(avg_used_ * 1.25));
      account_->pooled_resident += static_cast<int64_t>(b->resident());
      free_.push_back(std::move(b));
    }
  }
  b.reset();  // not pooled: unmapped (outside the lock)
  // Given back after the pool counted what it keeps: a budget check in
  // between counts the pages twice (the safe way), never not at all.
  account_->in_batches -= charged;
}

int64_t BufferPool::Shrink(int64_t bytes) {
  std::vector<std::unique_ptr<BatchBuffer>> drop;
  int64_t freed = 0;
  {
    MutexLock l(&mu_);
    while (freed < bytes && !free_.empty()) {
      freed += static_cast<int64_t>(free_.back()->resident());
      account_->pooled_resident -= static_cast<int64_t>(free_.back()->resident());
      drop.push_back(std::move(free_.back()));
      free_.pop_back();
    }
  }
  return freed;  // `drop` unmaps outside the lock
}

}  // namespace cqlstream::loader
