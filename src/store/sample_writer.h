// Copyright (c) cqlstream authors.
//
// The sample writer: samples from memory (a program, a Spark task) written
// into one split of a dataset, resumable and idempotent exactly as
// `cqlstream ingest` is (store/ingest.h), with the same validation, the
// same rows and the same checksums (store/segment_writer.h writes them).
//
// A source_id names one segment of the split (docs/schema.md): a sample's
// position is the order of its Add call. Opening a writer with a source_id
//
//   that the split has no segment for   -> claims a new segment;
//   whose segment is open               -> resumes it: the first next_pos
//                                          Add calls are already committed
//                                          and write nothing (counted as
//                                          `resumed`), later ones continue
//                                          at index next_pos;
//   whose segment is sealed             -> complete: Add writes nothing.
//
// So a program that writes the same samples in the same order under the same
// source_id (a retried Spark task) never duplicates one, wherever the earlier
// attempt stopped. The segment's fingerprint is kWriterFingerprint, so a
// source_id that `cqlstream ingest` used for the split is refused.
// Writers with different source_ids may run at once (each claims its own
// segment); two writers with the SAME source_id must not (the second would
// rewrite or duplicate the first's positions): a Spark job turns speculative
// execution off.
//
// Validation happens in Add, before a sample takes a position: a sample that
// fails it is an InvalidArgument naming the position and path, and the next
// Add takes the same position (so a re-run that fails on the same sample
// numbers every other sample alike). Checked: non-empty bytes, at most
// kMaxPayloadBytes with the target; what ingest's ReadItem checks and does
// (store/source.h PreparePayload: CheckImage of the sample and its target
// unless the dataset's kind is blob, then the dataset's preprocessing); the label kind's
// label (class: one label in [0, classes); multilabel: at most
// kMaxLabelsPerSample in [0, classes); target: the target bytes; none:
// nothing); paths, target paths and extra keys and values valid UTF-8 of at
// most kMaxWriterTextBytes (extra in all). Class names are fixed when the
// dataset is created: a writer of an existing dataset must give the same
// list or none.
//
// Pipeline: Add copies the bytes and returns once the sample is handed to
// the segment writer (at most `concurrency` samples and `memory_bytes` of
// payload in flight: Add waits while either is reached). The watermark is
// committed every commit_interval (or commit_every samples), by Flush, and
// at Close, which seals the segment. Abort (or destroying an open writer)
// waits for the writes in flight, commits the watermark and leaves the
// segment open for a later writer with the same source_id.
//
// Ownership: the writer shares the session (kept alive by it). Thread-safety:
// every member may be called from any thread. Add, Flush, Close, Abort and
// AbandonForTesting are the feeder's calls and run one at a time (feed_mu_):
// positions follow the order in which Add calls get that lock, and one that
// waits for memory or a write slot, or a Flush draining the writes, makes the
// others wait with it. report() takes only mu_, held for copies, so it
// answers at once from another thread while the feeder waits.
#ifndef CQLSTREAM_STORE_SAMPLE_WRITER_H_
#define CQLSTREAM_STORE_SAMPLE_WRITER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cql/request.h"
#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "net/session.h"
#include "store/schema.h"
#include "store/segment_writer.h"
#include "util/mutex.h"

namespace cqlstream::store {

// The fingerprint of every segment a sample writer claims.
inline constexpr const char* kWriterFingerprint = "sample-writer";
// Paths, target paths, a source_id, and all extra keys and values together.
inline constexpr size_t kMaxWriterTextBytes = 64 << 10;

struct SampleWriterOptions {
  std::string keyspace = "cqlstream";
  std::string dataset;
  std::string split = "train";  // [A-Za-z0-9_.-]{1,64}
  std::string source_id;        // non-empty UTF-8, at most 1024 bytes
  std::string source = "sample writer";  // segments.source: where the samples come from, for humans
  // Unset: the existing dataset's (a new one: none / image / the default).
  std::optional<LabelKind> label_kind;
  std::optional<std::vector<std::string>> class_names;  // needed to create a class / multilabel dataset
  std::optional<SampleKind> kind;
  // Ingest-time preprocessing of images, canonical text (store/preprocess.h;
  // "" none). Unset: the existing dataset's (a new one: none).
  std::optional<std::string> preprocess;
  std::optional<int32_t> chunk_size;
  std::string description;            // of a new dataset
  Replication replication;            // of a new keyspace
  bool replication_given = false;
  int concurrency = 64;                     // samples in flight
  int64_t memory_bytes = 256ll << 20;       // payload bytes accepted and not yet written
  cql::Consistency consistency = cql::Consistency::kLocalQuorum;
  std::chrono::milliseconds commit_interval{2000};
  int64_t commit_every = 0;                 // also commit every this many samples (0: by time only)
  int write_attempts = 3;
  int64_t max_batch_bytes = 8 << 20;
  int meta_batch = 32;
};

// One sample as Add takes it; the bytes are copied before Add returns.
struct SampleInput {
  std::span<const uint8_t> data;
  std::optional<std::span<const uint8_t>> target;  // label kind target
  std::optional<int32_t> label;                    // label kind class
  std::vector<int32_t> labels;                     // label kind multilabel
  std::string path;  // "": "<source_id>/<position>"
  std::string target_path;
  std::map<std::string, std::string> extra;
};

struct SampleWriterReport {
  std::string dataset, split, source_id;
  bool created_dataset = false;
  int32_t seg = -1;
  std::string action;       // "new", "resumed" or "complete"
  int64_t start_count = 0;  // committed samples when the writer opened
  int64_t added = 0;        // Add calls that took a position
  int64_t resumed = 0;      // of which were already committed (nothing written)
  int64_t written = 0;      // samples written by this writer
  int64_t bytes = 0;        // their payload bytes
  int64_t count = 0;        // what the segment row says now
  bool sealed = false;
};

class SampleWriter {
 public:
  // Reads the dataset, creates what is missing (keyspace, catalog, dataset)
  // and claims or resumes the segment of options.source_id. A session made
  // with an opening's stop (net::SessionOptions::stop) is interrupted in the
  // reads; the stop is cleared before the first write and when Open returns
  // a writer.
  static StatusOr<std::unique_ptr<SampleWriter>> Open(std::shared_ptr<net::Session> session,
                                                      const SampleWriterOptions& options);
  ~SampleWriter();
  SampleWriter(const SampleWriter&) = delete;
  SampleWriter& operator=(const SampleWriter&) = delete;

  // The next sample: its key (seg:idx; an already committed position gives
  // the key it has). Errors: InvalidArgument (the sample; nothing taken),
  // AlreadyExists (a sealed segment has no such position), a write that
  // failed (every later call fails too), or the writer is closed.
  // `interrupted` (may be empty) is asked before each wait of at most 50 ms
  // for memory or a write slot (the writes in flight hold them; a stalled
  // cluster holds them up to the request timeout), with feed_mu_ held (mu_
  // and the segment writer's lock released: it must not call this writer's
  // Add, Flush, Close or Abort, which would wait on feed_mu_; report() is
  // fine): once it says yes, Cancelled("interrupted") with the sample not
  // taken (no position: the next Add takes it, as after an
  // InvalidArgument). The periodic commit Add makes (commit_interval) is
  // not interrupted.
  StatusOr<SampleKey> Add(const SampleInput& sample, const std::function<bool()>& interrupted = {})
      EXCLUDES(feed_mu_, mu_);
  // Waits for the writes in flight and commits the watermark.
  // `interrupted` (may be empty), for Flush, Close and Abort: asked as Add's
  // (same lock held) before each wait of at most 50 ms for the writes in
  // flight; once it says yes, Cancelled("interrupted"), nothing committed
  // or sealed by the call, the writer still open (the writes go on: call it
  // again, or Abort). The commit after that wait is not interrupted.
  Status Flush(const std::function<bool()>& interrupted = {}) EXCLUDES(feed_mu_, mu_);
  // Flush, then seals the segment. A writer whose writes failed is not
  // sealed (its watermark is committed) and returns the error. Idempotent.
  Status Close(const std::function<bool()>& interrupted = {}) EXCLUDES(feed_mu_, mu_);
  // Waits for the writes in flight, commits the watermark, leaves the
  // segment open. Idempotent; also done by the destructor of an open writer.
  Status Abort(const std::function<bool()>& interrupted = {}) EXCLUDES(feed_mu_, mu_);
  // Testing: a crash. Waits for the writes in flight (rows above the
  // committed count exist) and commits nothing more.
  void AbandonForTesting() EXCLUDES(feed_mu_, mu_);

  // The counts now (count: the last committed watermark); never waits for
  // the feeder.
  SampleWriterReport report() const EXCLUDES(mu_);
  const DatasetInfo& dataset() const { return dataset_; }

 private:
  SampleWriter(std::shared_ptr<net::Session> session, const SampleWriterOptions& options);
  Status OpenImpl() EXCLUDES(feed_mu_, mu_);
  Status Validate(const SampleInput& in, int64_t position) const;
  StatusOr<Payload> Prepare(const SampleInput& in, int64_t position) const;
  Status Finish(bool seal, bool commit) REQUIRES(feed_mu_) EXCLUDES(mu_);
  // Waits for the writes in flight as Flush's `interrupted` says: false once
  // it said yes.
  bool Drain(const std::function<bool()>& interrupted) REQUIRES(feed_mu_) EXCLUDES(mu_);
  // Commits the watermark (sealing when asked); report_.count follows.
  Status Commit(bool seal) REQUIRES(feed_mu_) EXCLUDES(mu_);

  const std::shared_ptr<net::Session> session_;
  const SampleWriterOptions o_;
  DatasetInfo dataset_;           // written by OpenImpl only
  ReadOptions read_;              // written by OpenImpl only
  IngestStatements statements_;   // written by OpenImpl only
  std::shared_ptr<ByteBudget> budget_;
  // Written by OpenImpl only; null: nothing to write (complete). Its feeder
  // calls are made under feed_mu_, its counts() from any thread.
  std::shared_ptr<SegmentWriter> writer_;

  // The feeder's lock: held for a whole Add, Flush, Close or Abort.
  mutable Mutex feed_mu_ ACQUIRED_BEFORE(mu_);
  Committed start_ GUARDED_BY(feed_mu_);
  bool closed_ GUARDED_BY(feed_mu_) = false;
  int64_t since_commit_ GUARDED_BY(feed_mu_) = 0;
  std::chrono::steady_clock::time_point last_commit_ GUARDED_BY(feed_mu_);

  // The report's lock: held only to read or update report_ (never while
  // waiting), so report() does not wait for the feeder.
  mutable Mutex mu_;
  SampleWriterReport report_ GUARDED_BY(mu_);
};

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_SAMPLE_WRITER_H_
