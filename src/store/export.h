// Copyright (c) cqlstream authors.
//
// Export: writes a dataset back to files, byte-identical to what was
// ingested (each sample's checksum is verified on the way).
//
//   label kind class      DIR/<split>/<class name>/<base name of path>
//   other kinds           DIR/<split>/<path>
//   targets               DIR/<split>/<target_path>
//   non-class kinds also  DIR/manifest.csv  (path,label|labels,target,split
//                         and the extra columns; re-ingestable)
//
// Paths are made safe first: a leading '/' is dropped and '..' components
// become '_'. Two samples that would land on the same file keep the first
// name; the others get ".<seg>_<idx>" before the extension (counted in the
// report).
//
// Thread-safety: Export runs on the calling thread plus worker threads;
// on_progress is called from worker threads (one at a time).
#ifndef CQLSTREAM_STORE_EXPORT_H_
#define CQLSTREAM_STORE_EXPORT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "net/session.h"

namespace cqlstream::store {

struct ExportOptions {
  std::string dir;
  std::string split;  // empty: every split
  int concurrency = 16;
  const std::atomic<bool>* stop = nullptr;
  std::function<void(int64_t done, int64_t total, int64_t bytes)> on_progress;
};

struct ExportReport {
  int64_t total = 0;
  int64_t files = 0;       // images and targets written
  int64_t samples = 0;
  int64_t bytes = 0;
  int64_t renamed = 0;     // name collisions resolved with a suffix
  std::vector<std::string> problems;  // "seg:idx path: what" (missing/corrupt samples, not written)
  double seconds = 0;
};

Status Export(net::Session& s, const DatasetInfo& d, const ExportOptions& o, ExportReport* report);

// The relative output path of an image (exposed for tests).
std::string ExportPath(const DatasetInfo& d, const std::string& split, const std::string& path,
                       std::optional<int32_t> label);
// `p` without a leading '/', with '..' components replaced by '_'.
std::string SafeRelativePath(const std::string& p);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_EXPORT_H_
