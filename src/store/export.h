// Copyright (c) cqlstream authors.
//
// Export: writes a dataset back to files, byte-identical to what was
// ingested (each sample's checksum is verified on the way). An attached
// dataset (no checksums, no paths) is written with files named by the
// sample's foreign key, in a folder per class (store/attached_scan.h).
//
//   label kind class      DIR/<split>/<class name>/<base name of path>
//   other kinds           DIR/<split>/<path>
//   targets               DIR/<split>/<target_path>
//   non-class kinds also  DIR/manifest.csv  (path,label|labels,target,split
//                         and the extra columns; re-ingestable)
//
// Paths are made safe first: a leading '/' is dropped, '..' components
// become '_', and a file name of '.', '..' or nothing becomes '_'. Files are
// written through OutputDir (util/output_dir.h): relative to a descriptor of
// DIR, never following a symbolic link found there, never overwriting or
// truncating an existing file; DIR must be empty unless `force`. A sample
// whose name is taken (by an earlier sample, or by a file already in DIR)
// gets ".<seg>_<idx>" before the extension (counted in the report).
//
// Streaming: the dataset is written block by block (1024 samples of one
// segment, in key order, so names resolve the same way on every run); memory
// does not grow with the dataset (the manifest is appended block by block;
// for non-class kinds one extra pass over the metadata first collects the
// extra column names). Only the first kMaxProblemsKept problems are kept.
//
// Thread-safety: Export runs on the calling thread plus worker threads;
// on_progress is called from the calling thread.
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
  bool force = false;  // write into a non-empty DIR (existing files are kept)
  int concurrency = 16;
  const std::atomic<bool>* stop = nullptr;
  std::function<void(int64_t done, int64_t total, int64_t bytes)> on_progress;
};

struct ExportReport {
  int64_t total = 0;
  int64_t files = 0;       // images and targets written
  int64_t samples = 0;
  int64_t bytes = 0;
  int64_t renamed = 0;     // files written under a suffixed name (name collisions)
  std::vector<std::string> problems;  // "seg:idx path: what" (missing/corrupt samples, not written)
  int64_t problems_omitted = 0;       // problems beyond kMaxProblemsKept (counted only)
  double seconds = 0;
};

inline constexpr size_t kMaxProblemsKept = 1000;

Status Export(net::Session& s, const DatasetInfo& d, const ExportOptions& o, ExportReport* report);

// The relative output path of an image (exposed for tests).
std::string ExportPath(const DatasetInfo& d, const std::string& split, const std::string& path,
                       std::optional<int32_t> label);
// `p` without a leading '/', with '..' components replaced by '_', '.' and
// empty components dropped, NUL bytes replaced by '_', a component over 200
// bytes cut to a prefix + "~" + its xxh64 in hex (+ a short extension); "_"
// when nothing is left.
std::string SafeRelativePath(const std::string& p);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_EXPORT_H_
