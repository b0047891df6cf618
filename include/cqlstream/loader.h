// Copyright (c) cqlstream authors.
//
// The cqlstream loader: reads the samples of a dataset split (or of a
// selection) from Cassandra / ScyllaDB into batches, keeping the training
// loop fed whatever the network latency.
//
// How it works (see docs/loader.md for the full story):
//  * Epoch plan: a global shuffle of the split per epoch, keyed by (seed,
//    epoch) only, cut into disjoint contiguous slices per rank; generated on
//    demand (no per-sample key list).
//  * Incremental prefetching: a sliding window of single-sample requests is
//    kept in flight and refilled as each answer arrives. The window starts
//    small and adapts (grows while throughput rises, backs off on timeouts
//    and overload), and so do the connections per host.
//  * Out-of-order assembly (default): a batch is filled with samples in the
//    order their data arrives, so one slow sample never stalls a batch; it
//    lands in a later batch of the same epoch. Samples never cross an epoch
//    boundary. Ordered mode keeps the plan's exact batch composition and
//    order (bit-for-bit reproducible), hiding latency with a deeper window.
//  * Exactly once: each sample of the rank's part of an epoch is delivered
//    exactly once, through timeouts, retries (with backoff and failover to
//    other replicas), hedged requests, lost connections and node restarts.
//    A sample that still cannot be read is named (key and path): by default
//    Next() returns an error; with OnMissing::kSkip it is skipped and counted.
//  * Memory is bounded by a byte budget (bytes in flight + assembled batches
//    + batches handed out and not yet released). Sample bytes are received
//    from the socket directly into the batch buffer; buffers are recycled.
//
// Thread-safety: a Loader may be used from one consumer thread at a time
// (Next, State, Restore); Metrics() may be called from any thread. Batches
// are immutable once handed out and may be read from any thread.
// Ownership: Next() hands out std::shared_ptr<const Batch>; the batch memory
// stays valid while any copy of that pointer (or a view made from it, e.g. a
// NumPy array in Python) is alive; dropping the last one returns the buffer to
// the loader's pool. Batches may outlive the Loader.
#ifndef CQLSTREAM_LOADER_H_
#define CQLSTREAM_LOADER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/options.h"
#include "cqlstream/status.h"

namespace cqlstream {

enum class OnMissing { kRaise, kSkip };

struct LoaderOptions {
  ConnectionOptions connection;
  std::string dataset;
  std::string split = "train";
  std::string selection_path;  // when set: read this selection instead of the split
  int batch_size = 256;
  bool shuffle = true;
  uint64_t seed = 0;
  int rank = -1;        // -1: $RANK, else 0
  int world_size = -1;  // -1: $WORLD_SIZE, else 1
  bool ordered = false;
  bool drop_last = false;
  int64_t epochs = 1;   // <= 0: endless
  OnMissing on_missing = OnMissing::kRaise;
  bool verify_checksums = false;

  // Caps; 0 means automatic. They should not be needed.
  int max_in_flight = 0;              // samples in flight (the adaptive window's ceiling; default 16384; packed: 16384 x P / 16)
  int initial_window = 0;             // first window (default 32)
  bool adaptive = true;               // false: window fixed at max_in_flight (benchmarks)
  int64_t memory_bytes = 0;           // byte budget (default: max(1 GiB, 8 batches))
  // Address space reserved up front per batch buffer (default: batch_size x
  // the catalog's max_size + 1 MiB, at most 1 GiB). A sample that does not
  // fit at its turn gets a buffer of its own, joined with the batch's when
  // the batch is complete (one extra copy): larger batches still load.
  int64_t max_batch_reservation = 0;
  int max_connections_per_host = 0;   // ceiling for adaptive connections (default 256, a safety limit)
  // Per attempt. Default: adaptive, 8 x the p99 latency within [2 s, 30 s]
  // (10 s until 200 latencies were seen).
  std::chrono::milliseconds request_timeout{0};
  int max_attempts = 0;               // per sample (default 64; 3 for a missing or corrupt row)
  std::chrono::milliseconds retry_budget{0};    // per sample, from first failure (default 120 s)
  bool hedge = true;                  // hedged requests for slow samples
  // Coalesced reads of small samples (a segment's max_size at most one chunk
  // and 16 KiB; an attached dataset's rows once the samples read so far were
  // all at most 16 KiB, and its key lookups): keys per request, at most 100;
  // 0: automatic (64, and at most a quarter of the window), 1: off (every
  // sample its own request).
  int coalesce = 0;
  // Packed reads (docs/loader.md, "Packed reads"): read the split's packed
  // segments (`cqlstream pack`) one pack of up to 100 small samples per
  // request, in the packed order: each epoch reads the packs in a fresh
  // order and each pack's members in a fresh order, and which samples
  // share a pack (and so arrive together) is fixed when the dataset is
  // packed. false (the default): the per-sample global shuffle. A split
  // without packs, or a selection, is an error.
  bool packed = false;
  // The interrupt of Open (null: none): once *open_stop is set, Open gives
  // up at its next wait (connect, catalog and pack reads, prepares), within
  // 50 ms (up to 2 s while a name lookup, TCP or TLS handshake is under
  // way: docs/python.md), with Cancelled("interrupted"). Looked at only
  // while Open runs. Shared: a wait of Open's on another thread never
  // outlives it.
  std::shared_ptr<const std::atomic<bool>> open_stop;
};

// A batch: one contiguous buffer holding the samples' bytes, with per-sample
// offsets and sizes. For datasets with a blob target (label kind "target"),
// sample i's payload is image bytes [offset, offset + image_size) followed by
// its target bytes.
class Batch {
 public:
  virtual ~Batch() = default;
  size_t size() const { return keys.size(); }
  // The samples' bytes (sum of sizes, possibly with no gaps) and views.
  virtual std::span<const uint8_t> data() const = 0;
  std::span<const uint8_t> sample(size_t i) const { return data().subspan(offsets[i], sizes[i]); }

  int64_t epoch = 0;
  int64_t index = 0;                  // batch number within the epoch (for this rank)
  std::vector<uint64_t> offsets;      // into data()
  std::vector<uint64_t> sizes;        // payload bytes (image + target)
  std::vector<uint64_t> image_sizes;  // image bytes (== sizes unless targets)
  std::vector<int32_t> labels;        // class labels (-1 when none)
  std::vector<std::vector<int32_t>> multilabels;  // label kind multilabel only
  std::vector<SampleKey> keys;
};
using BatchPtr = std::shared_ptr<const Batch>;

struct LoaderMetrics {
  double images_per_s = 0;      // over the last few seconds
  double mb_per_s = 0;
  int64_t images = 0;           // delivered so far
  int64_t bytes = 0;
  int64_t batches = 0;
  int in_flight = 0;            // requests in flight
  // Fetch calls not yet ended: a call interrupted while it waited counts
  // until the last of its reads has ended (its batch is then given back).
  int fetches = 0;
  int window = 0;               // current window (target requests in flight)
  int connections = 0;          // open connections
  int64_t bytes_in_flight = 0;  // estimate
  int64_t memory_bytes = 0;     // charged against the budget
  int64_t memory_budget = 0;
  // The most memory_bytes has been since the loader was made, as counted
  // when bytes were charged: never below it, and above it by a batch
  // buffer's kept pages for each batch being released at that moment (a
  // release counts them in the pool before it takes them from the batch).
  int64_t memory_peak_bytes = 0;
  double latency_p50_ms = 0, latency_p99_ms = 0;
  // timeouts: requests that timed out (a coalesced request counts once).
  int64_t retries = 0, hedges = 0, hedge_wins = 0, timeouts = 0, duplicates_dropped = 0;
  int64_t skipped = 0;          // samples skipped (on_missing = skip)
  int64_t dropped = 0;          // samples not delivered because of drop_last
  double stall_s = 0;           // time the consumer waited in Next()
  int64_t direct_bytes = 0;     // received straight into batch memory
  int64_t copied_bytes = 0;     // copied from a receive buffer into batch memory
  int64_t coalesced_requests = 0;  // requests that read several samples (LoaderOptions::coalesce)
  int64_t coalesced_samples = 0;   // samples read by them (first attempts)
  int64_t packed_requests = 0;     // of those, reads of one pack (LoaderOptions::packed)
  int64_t pack_fallbacks = 0;      // samples a pack lacked or held damaged, read alone from the data table
  // Samples whose try in a grouped read (coalesced, packed, or an attached
  // dataset's grouped foreign read) did not deliver them: the request
  // failed, its answer was refused (rows not asked for, ...), or it lacked
  // the sample or held it damaged. Each is then read alone (a retry, or a
  // pack fallback), or fails as a single read would.
  int64_t group_failures = 0;
  // Attached datasets: reads of the key snapshot sent (a sample's first
  // attempt in the loader's life, and samples whose key the loader could
  // not keep), and keys kept for later epochs and Fetch (64 MiB at most).
  int64_t key_lookups = 0;
  int64_t foreign_keys_cached = 0;
  // Answers of the loader's session (data reads, attached reads) whose
  // column specs were not byte for byte those the read was prepared with,
  // were decoded to be checked name by name, and passed (the check of
  // docs/security.md; 0 where the server encodes an answer's columns as it
  // encoded its PREPARED answer's, as Cassandra does).
  int64_t columns_decoded = 0;
  // Connections the window controller asks for, all hosts together (the
  // session spreads them over the up hosts, rounded up, at least one each;
  // open ones beyond that are parked and close after 30 s, but on
  // ScyllaDB's shard-aware pools: docs/loader.md).
  int connections_wanted = 0;
  // Rows of system.peers that the session's current topology left out, each
  // naming a host already listed (a node that lists itself among its peers,
  // a row written twice): they would otherwise be a second pool to the
  // same node and its tokens twice in the ring. Nonzero means a node's
  // system tables are inconsistent (`cqlstream ping` prints the count too).
  int ignored_peer_rows = 0;
};

class Loader {
 public:
  static StatusOr<std::unique_ptr<Loader>> Open(LoaderOptions options);
  ~Loader();

  // The next batch of the current epoch, or nullptr at the end of the epoch;
  // the call after that starts the next epoch. Blocks until a batch is ready.
  // An unreadable sample (OnMissing::kRaise) makes the next call fail with a
  // Status naming the sample's key and path.
  StatusOr<BatchPtr> Next();
  // Next, asking `interrupted` (on the calling thread, no lock of the
  // loader's held) before each wait, that is at least every 50 ms while it
  // waits: once it returns true, Next returns Cancelled("interrupted")
  // without taking a batch, and the loader goes on as if the call had not
  // been made (the next call returns the batch this one would have), except
  // that the reads have started: Restore is refused after it, as after any
  // Next. A batch ready at once is returned without asking.
  StatusOr<BatchPtr> Next(const std::function<bool()>& interrupted);
  // True when every epoch has been delivered (never for endless loaders).
  bool Done() const;

  // Interactive mode (e.g. an inference server): reads exactly these samples
  // now, in this order, with the loader's retries, hedging and zero-copy
  // placement, independently of the epoch stream. Keys may be any committed
  // keys of the dataset (any split). A key that cannot be read fails the call
  // with a Status naming it (OnMissing::kSkip: it is left out and counted).
  // Thread-safe: may run concurrently with Next() and other Fetch() calls.
  StatusOr<BatchPtr> Fetch(const std::vector<SampleKey>& keys);
  // Fetch, asking `interrupted` as Next does (before each wait, at least
  // every 50 ms, on the calling thread, no lock of the loader's held): once
  // it returns true, Fetch returns Cancelled("interrupted"), even where the
  // reads ended while it was asked. The reads sent for the call end on their
  // own (answer, timeout or retries spent) and its batch is then given back
  // (Metrics().fetches counts the call until then; after Close, at once);
  // the loader stays usable. On a closed loader: Cancelled("loader closed").
  StatusOr<BatchPtr> Fetch(const std::vector<SampleKey>& keys, const std::function<bool()>& interrupted);

  // Batches per epoch for this rank.
  int64_t BatchesPerEpoch() const;
  // Samples per epoch for this rank.
  int64_t SamplesPerEpoch() const;
  int rank() const;
  int world_size() const;
  const DatasetInfo& dataset() const;

  // A checkpoint at the current batch boundary: what this rank has delivered
  // so far in the current epoch (samples prefetched but not handed out are not
  // counted and will be read again). Opaque bytes (a versioned format).
  std::string State() const;
  // Restores a checkpoint, before the first Next(). `states` holds the states
  // of all ranks of the previous run (any world size) or just this rank's
  // own state (same world size); the rest of the epoch is re-split over the
  // current world size and delivered exactly once.
  Status Restore(const std::vector<std::string>& states);

  LoaderMetrics Metrics() const;
  void Close();

  struct Impl;

 private:
  explicit Loader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cqlstream

#endif  // CQLSTREAM_LOADER_H_
