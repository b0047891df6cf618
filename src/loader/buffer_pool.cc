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

BudgetEstimate EstimateLanded(const BudgetInputs& in) {
  auto nn = [](int64_t v) { return std::max<int64_t>(v, 0); };
  const int64_t pooled = nn(in.pooled);
  const int64_t incoming = nn(in.incoming);
  const int64_t into_new = incoming - std::clamp<int64_t>(in.into_open, 0, incoming);
  const int64_t lost = nn(in.partial_batches) * nn(in.batch_bytes);
  const int64_t credit = std::clamp<int64_t>(std::min(nn(in.reusable), into_new) - lost, 0, pooled);
  const int64_t batch = nn(in.batch_bytes);
  const int64_t new_batches = (batch > 0 ? (into_new + batch - 1) / batch : 0) + nn(in.partial_batches);
  const int64_t rounding = nn(in.page) * (nn(in.open_batches) + new_batches);
  return {nn(in.in_batches) + pooled + incoming - credit + rounding + nn(in.headroom), pooled - credit};
}

size_t PageRound(size_t bytes) { return RoundUp(bytes, PageSize()); }

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
    if (!free_.empty()) {  // the most kept pages
      auto b = std::move(free_.back());
      free_.pop_back();
      // Added to the batches before taken from the pool: a total read in
      // between counts the pages twice (the safe way), never not at all.
      b->charged_ = b->resident();
      account_->in_batches += static_cast<int64_t>(b->charged_);
      account_->pooled_resident -= static_cast<int64_t>(b->resident());
      return b;
    }
  }
  return BatchBuffer::Reserve(capacity_);
}

void BufferPool::Charge(BatchBuffer& b, size_t used) {
  b.Touched(used);
  const size_t pages = RoundUp(used, PageSize());
  if (pages <= b.charged_) return;
  account_->Grow(static_cast<int64_t>(pages - b.charged_));
  b.charged_ = pages;
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
      auto at = std::upper_bound(free_.begin(), free_.end(), b->resident(),
                                 [](size_t r, const std::unique_ptr<BatchBuffer>& x) { return r < x->resident(); });
      free_.insert(at, std::move(b));
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
    size_t n = 0;
    while (freed < bytes && n < free_.size()) {  // fewest kept pages first
      freed += static_cast<int64_t>(free_[n]->resident());
      account_->pooled_resident -= static_cast<int64_t>(free_[n]->resident());
      drop.push_back(std::move(free_[n]));
      ++n;
    }
    free_.erase(free_.begin(), free_.begin() + static_cast<std::ptrdiff_t>(n));
  }
  return freed;  // `drop` unmaps outside the lock
}

int64_t BufferPool::Reusable(int64_t per_buffer, int64_t count) {
  MutexLock l(&mu_);
  int64_t sum = 0;
  for (auto it = free_.rbegin(); it != free_.rend() && count > 0; ++it, --count) {  // most kept pages first
    sum += std::min(static_cast<int64_t>((*it)->resident()), std::max<int64_t>(per_buffer, 0));
  }
  return sum;
}

}  // namespace cqlstream::loader
