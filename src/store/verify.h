// Copyright (c) cqlstream authors.
//
// Verify: reads every committed sample of a dataset (or of one split) with
// the loader's data read (DataReadQuery) and checks it against the layout:
// the chunk bytes add up to `size`, xxh64 of the bytes equals `checksum`, the
// metadata row exists and agrees (size, image_size, checksum, label, labels).
// Problems are reported by key (seg:idx) and path.
//
// An attached dataset (cqlstream attach) has no checksums and no metadata
// table: each sample's key snapshot row and foreign row must exist and
// decode (store/attached_scan.h), sizes and readability only.
//
// Work is spread over metadata blocks; `concurrency` requests in flight.
//
// Thread-safety: Verify runs on the calling thread plus worker threads;
// on_progress is called from worker threads (one at a time).
#ifndef CQLSTREAM_STORE_VERIFY_H_
#define CQLSTREAM_STORE_VERIFY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "net/session.h"
#include "store/scan.h"

namespace cqlstream::store {

struct VerifyOptions {
  std::string split;  // empty: every split
  int concurrency = 16;
  const std::atomic<bool>* stop = nullptr;
  // (samples checked, samples to check, bytes read, problems)
  std::function<void(int64_t, int64_t, int64_t, int64_t)> on_progress;
};

struct VerifyProblem {
  SampleKey key = 0;
  std::string split;
  std::string path;  // "" when the metadata row is missing
  std::string what;  // "missing data", "checksum mismatch", ...
};

struct VerifyReport {
  int64_t total = 0;    // committed samples to check
  int64_t checked = 0;
  int64_t bytes = 0;
  std::vector<VerifyProblem> problems;  // sorted by key
  double seconds = 0;
};

// Returns OK when the check ran (problems are in the report), an error when
// it could not run (unknown split, lost connection, ...).
Status Verify(net::Session& s, const DatasetInfo& d, const VerifyOptions& o, VerifyReport* report);

// What a data read returned for one sample.
struct SampleData {
  int32_t rows = 0;                    // 0: no data partition
  std::optional<int64_t> size, image_size, checksum;
  std::optional<int32_t> label;
  std::vector<int32_t> labels;
  int64_t data_bytes = 0;              // sum of the chunk lengths
  uint64_t xxh64 = 0;                  // of the chunk bytes in order
};

// Checks one sample against the layout and its metadata row (nullptr when
// missing); returns "" or what is wrong ("missing data", "size mismatch:
// chunks hold 10 bytes, size says 12", "checksum mismatch", "missing
// metadata row", "metadata disagrees: label 3 vs 4", ...).
std::string CheckSample(const SampleData& data, const MetaRow* meta);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_VERIFY_H_
