// Copyright (c) cqlstream authors.
//
// RequestPrefetcher: the serving core of fn.cqlstream.interactive_reader and
// fn.cqlstream.decoupled_reader (Triton-style serving), without DALI.
//
// A request is a list of sample keys (one Triton/DALI request). The
// prefetcher cuts each request into chunks (interactive: the whole request;
// decoupled: `mini_batch_size` keys) and fetches chunks on its own worker
// threads (one blocking Loader::Fetch per chunk), in request order, so that
// requests queued behind the one being served are already on the network:
// back-to-back requests overlap their round trips.
//
// Iterations: each request yields output iterations in order. Interactive:
// exactly one iteration per request, its samples in the request's order.
// Decoupled: ceil(n / mini_batch_size) iterations of min(mini_batch_size,
// left) samples each, taken from the chunks that have arrived (key order
// among them; so out of order within the request, each key exactly once). Iteration
// sizes are known before any data arrives (NextIterationSize), as DALI's
// executor needs them when it schedules an iteration.
//
// Bound (documented in docs/triton.md): at most `max_outstanding` chunks are
// issued and not yet fully emitted, so at most that many Fetch calls are in
// flight and at most max_outstanding x max_chunk_keys fetched samples wait
// in memory (their bytes also count against the loader's memory budget).
// Requests are taken from the caller (Add) only while WantsRequest() says so
// or when an iteration must be planned, so the caller's queue holds the rest.
//
// Errors: a chunk's error fails the iteration that finds it and every later
// iteration of the same request (with the same error), and only that
// request: the next request is served normally.
//
// Thread-safety: every method may be called from any thread (one mutex);
// TakeIteration blocks without holding it. Ownership: the prefetcher owns its
// worker threads and joins them in the destructor (after in-flight fetches
// return); emitted samples keep their fetched batches alive (SampleRef).
#ifndef CQLSTREAM_PLUGINS_DALI_REQUEST_PREFETCHER_H_
#define CQLSTREAM_PLUGINS_DALI_REQUEST_PREFETCHER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "cqlstream/loader.h"
#include "epoch_assembler.h"
#include "util/mutex.h"

namespace cqlstream::dali_plugin {

struct PrefetcherOptions {
  int mini_batch_size = 0;   // 0: interactive (one iteration per request), else decoupled
  int max_outstanding = 4;   // chunks issued and not fully emitted (>= 1)
  int max_chunk_keys = 256;  // keys per Fetch call (the loader's batch_size)
};

struct PrefetcherStats {
  int64_t requests = 0;           // requests added
  int64_t iterations = 0;         // iterations emitted (with or without error)
  int64_t fetches = 0;            // Fetch calls started
  int64_t failed_requests = 0;
  int64_t issued_ahead = 0;       // chunks issued while an earlier request was not yet emitted
  int in_flight = 0;              // Fetch calls running now
  int peak_in_flight = 0;         // most Fetch calls running at once
  int peak_outstanding = 0;       // most chunks issued and not yet emitted
};

class RequestPrefetcher {
 public:
  using FetchFn = std::function<StatusOr<BatchPtr>(const std::vector<SampleKey>&)>;

  // REQUIRES: o.max_outstanding >= 1, o.max_chunk_keys >= 1, o.mini_batch_size >= 0
  RequestPrefetcher(PrefetcherOptions o, FetchFn fetch);
  ~RequestPrefetcher();
  RequestPrefetcher(const RequestPrefetcher&) = delete;
  RequestPrefetcher& operator=(const RequestPrefetcher&) = delete;

  // Appends a request. An invalid one (too many keys for an interactive
  // iteration) is accepted and fails its iteration with a clear error.
  void Add(std::vector<SampleKey> keys) EXCLUDES(mu_);
  // Appends a request the caller could not read (e.g. keys of the wrong type
  // or shape): it takes its place in the order and plans the iterations a
  // request of `keys` keys would (interactive: one; decoupled:
  // ceil(keys / mini_batch_size), so none for zero keys), each failing with
  // `why`, so that the requests behind it keep their own iterations.
  // REQUIRES: !why.ok(), keys >= 0
  void AddInvalid(Status why, int64_t keys) EXCLUDES(mu_);
  // True when a new request's first chunk could be issued now.
  bool WantsRequest() const EXCLUDES(mu_);
  // Size of the next iteration not yet assigned, or nullopt when the requests
  // added so far have none left (the caller then adds the next request).
  std::optional<int> NextIterationSize() const EXCLUDES(mu_);
  // Assigns the next iteration (DALI's executor scheduled it).
  // REQUIRES: NextIterationSize().has_value()
  void AssignIteration() EXCLUDES(mu_);

  struct Iteration {
    std::vector<SampleRef> samples;
    bool last_of_request = false;  // the request is drained after this one
  };
  // Blocks until the oldest assigned iteration's samples have arrived.
  // REQUIRES: an assigned iteration that was not taken yet.
  StatusOr<Iteration> TakeIteration() EXCLUDES(mu_);
  // Iterations planned (assigned or not) that were not taken yet.
  int64_t PendingIterations() const EXCLUDES(mu_);

  PrefetcherStats Stats() const EXCLUDES(mu_);

 private:
  struct Chunk {
    std::vector<SampleKey> keys;
    bool issued = false, done = false;
    StatusOr<BatchPtr> result{Status::Internal("not fetched")};
    size_t next = 0;  // samples of the result already emitted
  };
  struct Request {
    uint64_t id = 0;
    int64_t size = 0;
    Status invalid;                     // set when the request cannot be served
    std::deque<Chunk> chunks;           // in key order
    std::vector<int> iteration_sizes;   // planned, in order
    size_t assigned = 0, taken = 0;     // iterations
    Status failed;                      // the first error seen while serving
  };

  void IssueLocked() REQUIRES(mu_);
  void WorkerLoop() EXCLUDES(mu_);
  bool ReadyLocked(const Request& r, int want) const REQUIRES(mu_);
  Iteration EmitLocked(Request& r, int want) REQUIRES(mu_);
  void RetireLocked() REQUIRES(mu_);
  int OutstandingLocked() const REQUIRES(mu_);
  void AppendLocked(std::unique_ptr<Request> r) REQUIRES(mu_);

  const PrefetcherOptions o_;
  const FetchFn fetch_;
  mutable Mutex mu_;
  CondVar work_cv_;   // workers: a chunk to fetch, or stop
  CondVar done_cv_;   // TakeIteration: a chunk finished
  std::deque<std::unique_ptr<Request>> requests_ GUARDED_BY(mu_);  // not fully taken, in order
  std::deque<Chunk*> to_fetch_ GUARDED_BY(mu_);  // issued, not yet picked by a worker
  uint64_t next_id_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
  PrefetcherStats stats_ GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
};

}  // namespace cqlstream::dali_plugin

#endif  // CQLSTREAM_PLUGINS_DALI_REQUEST_PREFETCHER_H_
