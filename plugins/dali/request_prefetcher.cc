// Copyright (c) cqlstream authors.
#include "request_prefetcher.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <utility>

namespace cqlstream::dali_plugin {

RequestPrefetcher::RequestPrefetcher(PrefetcherOptions o, FetchFn fetch) : o_(o), fetch_(std::move(fetch)) {
  assert(o_.max_outstanding >= 1 && o_.max_chunk_keys >= 1 && o_.mini_batch_size >= 0);
  // One worker per chunk that may be outstanding: an issued chunk never
  // waits for a thread.
  workers_.reserve(static_cast<size_t>(o_.max_outstanding));
  for (int i = 0; i < o_.max_outstanding; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

RequestPrefetcher::~RequestPrefetcher() {
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  work_cv_.SignalAll();
  done_cv_.SignalAll();
  for (auto& t : workers_) t.join();
}

void RequestPrefetcher::Add(std::vector<SampleKey> keys) {
  auto r = std::make_unique<Request>();
  r->size = static_cast<int64_t>(keys.size());
  const size_t n = keys.size();
  if (o_.mini_batch_size == 0) {
    // Interactive: one iteration, one Fetch, the request's order.
    if (n > static_cast<size_t>(o_.max_chunk_keys)) {
      r->invalid = Status::InvalidArgument(
          fmt::format("request of {} keys: at most max_batch_size ({}) per request", n, o_.max_chunk_keys));
    } else if (n > 0) {
      r->chunks.push_back(Chunk{std::move(keys)});
    }
    // An oversized request still plans a size DALI accepts, so that its
    // iteration fails with the error above rather than DALI's batch check.
    r->iteration_sizes.push_back(static_cast<int>(std::min(n, static_cast<size_t>(o_.max_chunk_keys))));
  } else {
    const size_t m = static_cast<size_t>(o_.mini_batch_size);
    for (size_t at = 0; at < n; at += m) {
      const size_t end = std::min(n, at + m);
      r->chunks.push_back(Chunk{std::vector<SampleKey>(keys.begin() + static_cast<std::ptrdiff_t>(at),
                                                       keys.begin() + static_cast<std::ptrdiff_t>(end))});
      r->iteration_sizes.push_back(static_cast<int>(end - at));
    }
  }
  MutexLock l(&mu_);
  AppendLocked(std::move(r));
}

void RequestPrefetcher::AddInvalid(Status why, int64_t keys) {
  assert(!why.ok() && keys >= 0);
  auto r = std::make_unique<Request>();
  r->size = keys;
  r->invalid = why.ok() ? Status::Internal("AddInvalid with an OK status") : std::move(why);
  // The plan of Add for as many keys (what the caller schedules for the
  // request), in sizes DALI accepts; each iteration fails in TakeIteration.
  if (o_.mini_batch_size == 0) {
    r->iteration_sizes.push_back(static_cast<int>(std::min<int64_t>(keys, o_.max_chunk_keys)));
  } else {
    const int64_t m = o_.mini_batch_size;
    for (int64_t at = 0; at < keys; at += m) r->iteration_sizes.push_back(static_cast<int>(std::min(m, keys - at)));
  }
  MutexLock l(&mu_);
  AppendLocked(std::move(r));
}

void RequestPrefetcher::AppendLocked(std::unique_ptr<Request> r) {
  r->id = next_id_++;
  stats_.requests++;
  requests_.push_back(std::move(r));
  IssueLocked();
}

int RequestPrefetcher::OutstandingLocked() const {
  int n = 0;
  for (const auto& r : requests_) {
    for (const auto& c : r->chunks) {
      if (!c.issued) continue;
      const bool drained = !r->failed.ok() ||
                           (c.done && (!c.result.ok() || c.next >= (*c.result ? (*c.result)->size() : 0)));
      if (!drained) ++n;
    }
  }
  return n;
}

bool RequestPrefetcher::WantsRequest() const {
  MutexLock l(&mu_);
  if (OutstandingLocked() >= o_.max_outstanding) return false;
  for (const auto& r : requests_) {
    if (!r->failed.ok() || !r->invalid.ok()) continue;
    for (const auto& c : r->chunks) {
      if (!c.issued) return false;  // chunks of requests already added come first
    }
  }
  return true;
}

void RequestPrefetcher::IssueLocked() {
  int outstanding = OutstandingLocked();
  bool earlier_pending = false;  // an earlier request still has iterations to take
  for (auto& r : requests_) {
    if (outstanding >= o_.max_outstanding) break;
    if (r->failed.ok() && r->invalid.ok()) {
      for (auto& c : r->chunks) {
        if (outstanding >= o_.max_outstanding) break;
        if (c.issued) continue;
        c.issued = true;
        to_fetch_.push_back(&c);
        ++outstanding;
        if (earlier_pending) stats_.issued_ahead++;
        stats_.peak_outstanding = std::max(stats_.peak_outstanding, outstanding);
        work_cv_.Signal();
      }
    }
    if (r->taken < r->iteration_sizes.size()) earlier_pending = true;
  }
}

void RequestPrefetcher::WorkerLoop() {
  MutexLock l(&mu_);
  for (;;) {
    while (!stop_ && to_fetch_.empty()) work_cv_.Wait(&mu_);
    if (stop_) return;
    Chunk* c = to_fetch_.front();
    to_fetch_.pop_front();
    stats_.fetches++;
    stats_.in_flight++;
    stats_.peak_in_flight = std::max(stats_.peak_in_flight, stats_.in_flight);
    const std::vector<SampleKey>& keys = c->keys;  // immutable once the request was added
    l.Unlock();
    StatusOr<BatchPtr> got = fetch_(keys);
    if (got.ok() && (!*got || (*got)->size() != keys.size())) {
      got = Status::Internal(fmt::format("Fetch returned {} of {} samples", *got ? (*got)->size() : 0, keys.size()));
    }
    l.Lock();
    stats_.in_flight--;
    c->result = std::move(got);
    c->done = true;
    done_cv_.SignalAll();
  }
}

std::optional<int> RequestPrefetcher::NextIterationSize() const {
  MutexLock l(&mu_);
  for (const auto& r : requests_) {
    if (r->assigned < r->iteration_sizes.size()) return r->iteration_sizes[r->assigned];
  }
  return std::nullopt;
}

void RequestPrefetcher::AssignIteration() {
  MutexLock l(&mu_);
  for (auto& r : requests_) {
    if (r->assigned < r->iteration_sizes.size()) {
      r->assigned++;
      return;
    }
  }
  assert(false && "AssignIteration without a planned iteration");
}

int64_t RequestPrefetcher::PendingIterations() const {
  MutexLock l(&mu_);
  int64_t n = 0;
  for (const auto& r : requests_) n += static_cast<int64_t>(r->iteration_sizes.size() - r->taken);
  return n;
}

bool RequestPrefetcher::ReadyLocked(const Request& r, int want) const {
  if (!r.invalid.ok() || !r.failed.ok()) return true;
  size_t have = 0;
  for (const auto& c : r.chunks) {
    if (!c.done) continue;
    if (!c.result.ok()) return true;  // fails the iteration now
    have += (*c.result)->size() - c.next;
  }
  return have >= static_cast<size_t>(want);
}

RequestPrefetcher::Iteration RequestPrefetcher::EmitLocked(Request& r, int want) {
  Iteration it;
  it.samples.reserve(static_cast<size_t>(want));
  // From the chunks that have arrived, in key order among them (an
  // interactive request is one chunk, so it keeps the request's order). At
  // most one chunk is left partly emitted, which keeps TakeIteration from
  // waiting on a chunk that cannot be issued.
  for (auto& c : r.chunks) {
    if (!c.done || it.samples.size() == static_cast<size_t>(want)) continue;
    const BatchPtr& b = *c.result;
    while (c.next < b->size() && it.samples.size() < static_cast<size_t>(want)) {
      it.samples.push_back(SampleRef{b, c.next++, false});
    }
  }
  return it;
}

void RequestPrefetcher::RetireLocked() {
  while (!requests_.empty()) {
    const Request& r = *requests_.front();
    if (r.taken < r.iteration_sizes.size()) break;
    const bool busy = std::any_of(r.chunks.begin(), r.chunks.end(), [](const Chunk& c) { return c.issued && !c.done; });
    if (busy) break;  // a worker still writes into it
    requests_.pop_front();
  }
}

StatusOr<RequestPrefetcher::Iteration> RequestPrefetcher::TakeIteration() {
  MutexLock l(&mu_);
  Request* r = nullptr;
  for (auto& q : requests_) {
    if (q->taken < q->iteration_sizes.size()) {
      r = q.get();
      break;
    }
  }
  if (r == nullptr || r->taken >= r->assigned) {
    return Status::Internal("TakeIteration without an assigned iteration");
  }
  const int want = r->iteration_sizes[r->taken];
  while (!stop_ && !ReadyLocked(*r, want)) done_cv_.Wait(&mu_);
  if (stop_) return Status::Cancelled("serving stopped");
  if (r->failed.ok()) {
    if (!r->invalid.ok()) r->failed = r->invalid;
    for (const auto& c : r->chunks) {
      if (r->failed.ok() && c.done && !c.result.ok()) r->failed = c.result.status();
    }
    if (!r->failed.ok()) stats_.failed_requests++;
  }
  r->taken++;
  stats_.iterations++;
  if (!r->failed.ok()) {
    // The request's later iterations fail too: DALI may have scheduled them
    // already (a scheduled iteration's size is asked for later, on another
    // thread), so they cannot be dropped without shifting the next request.
    Status s = r->failed;
    RetireLocked();
    IssueLocked();
    return s;
  }
  Iteration it = EmitLocked(*r, want);
  it.last_of_request = r->taken == r->iteration_sizes.size();
  RetireLocked();
  IssueLocked();
  return it;
}

PrefetcherStats RequestPrefetcher::Stats() const {
  MutexLock l(&mu_);
  return stats_;
}

}  // namespace cqlstream::dali_plugin
