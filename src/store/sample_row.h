// Copyright (c) cqlstream authors.
//
// The data row of one sample (docs/schema.md, layout 1) as a reader receives
// it: the cells of DataReadQuery()'s answer (key, static columns, chunks),
// checked against what the catalog says about the sample's segment. This is
// the pure, socket-free part of reading a sample: the loader feeds it the
// cells its frame decoder streams and places data bytes where it says; the
// fuzzer (tests/fuzz/sample_row_fuzz.cc) feeds it arbitrary rows.
//
// Nothing in a row is trusted, and the catalog's numbers (segments.max_size,
// datasets.chunk_size, the class list) are hints a row must agree with: a
// row that disagrees is a per-sample error (Corruption naming the sample and
// the disagreement), never a write outside the sample's region.
//
//   answer  := row+                      (one row per chunk, chunk order)
//   row     := seg idx size image_size checksum label labels data
//   key     : (seg, idx) of every row == the key asked for
//   statics : size in [0, max_size]; image_size null or in [0, size];
//             label null or in [0, classes) (label kind class);
//             labels null or list<int> of values in [0, classes)
//   chunks  : each <= chunk_size; only the last may be shorter;
//             their sum == size
//
// Thread-safety: value types and single-owner objects; no locking. The
// caller serializes the calls on one object.
#ifndef CQLSTREAM_STORE_SAMPLE_ROW_H_
#define CQLSTREAM_STORE_SAMPLE_ROW_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <string>

#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "net/session.h"

namespace cqlstream::store {

// What the catalog says about a sample: hints its row must agree with.
struct SampleHints {
  int64_t max_size = -1;   // segments.max_size of the sample's segment (< 0: unknown)
  int32_t chunk_size = 0;  // datasets.chunk_size (<= 0: unknown)
  LabelKind label_kind = LabelKind::kNone;
  int64_t classes = -1;    // class names in the mapping (< 0: unknown)
};

// The static columns of a data row (taken from the first row of an answer).
struct SampleStatics {
  bool present = false;  // the size column was there (not null)
  int64_t size = -1;
  int64_t image_size = -1;  // -1: null (the whole payload is the image)
  int64_t checksum = 0;
  int32_t label = -1;
  std::vector<int32_t> labels;
};

// The non-data cells of one answer (one page) of the data read of `key`.
// `continuation`: a later page of the same read (its static columns are
// not read again; its key cells are still checked).
class SampleRowCells {
 public:
  SampleRowCells(SampleKey key, bool continuation) : key_(key), continuation_(continuation) {}

  // A cell of column `col` (DataReadQuery's positions) other than data.
  // A malformed or mismatching cell is remembered: see status() and
  // key_mismatch().
  void OnCell(int32_t row, int32_t col, std::optional<std::span<const uint8_t>> data);

  // Some row carried another sample's key (a stale or misrouted answer).
  bool key_mismatch() const { return key_mismatch_; }
  // The first malformed static cell (Corruption naming the column), or OK.
  const Status& status() const { return status_; }
  const SampleStatics& statics() const { return statics_; }
  bool continuation() const { return continuation_; }

 private:
  void Fail(std::string what);

  SampleKey key_;
  bool continuation_;
  bool key_mismatch_ = false;
  SampleStatics statics_;
  Status status_;
};

// Checks a row's static columns against the catalog's hints (see the grammar
// above). Corruption naming the sample and what disagrees.
Status CheckStatics(SampleKey key, const SampleStatics& s, const SampleHints& h);

// Places the chunks of one sample, in order, into its region of `size`
// bytes: every chunk's offset is checked before a byte is written, so no
// row can make a caller write outside the region.
class ChunkPlacer {
 public:
  // Starts (over) for a sample of `size` >= 0 bytes.
  void Begin(int64_t size, int32_t chunk_size);
  // The offset in the region where the next chunk of `bytes` goes. Corruption
  // when the chunk would end past the size, is longer than the chunk size,
  // or follows a shorter chunk (a chunk is missing or out of place).
  StatusOr<uint64_t> Place(SampleKey key, int64_t bytes);
  // After the last chunk: Corruption unless the chunks add up to the size.
  Status Finish(SampleKey key) const;

  uint64_t written() const { return written_; }
  uint64_t size() const { return size_; }

 private:
  uint64_t size_ = 0;
  uint64_t written_ = 0;
  int64_t chunk_size_ = 0;
  bool short_seen_ = false;  // a chunk shorter than chunk_size was placed
};

// --- statements of the data row (layout 1; sample_row_io.cc) --------------
// The data read is DataReadQuery() (store/catalog.h) with its column
// positions kCol*. Writers insert a sample's chunks with these (the static
// columns ride with one chunk: docs/schema.md):
//   DataInsertQuery:      seg, idx, chunk, data, size, image_size, checksum, label, labels
//   DataChunkInsertQuery: seg, idx, chunk, data
std::string DataInsertQuery(const DatasetInfo& d);
std::string DataChunkInsertQuery(const DatasetInfo& d);
// A sample's path in the metadata table; bound values seg, block, idx (the
// block of idx is idx >> kBlockShift, store/scan.h).
std::string SamplePathQuery(const DatasetInfo& d);
// "seg:idx (path 'p')" for messages, or "seg:idx (path unknown)" when the
// path cannot be read (no statement, no row, an error: never fails).
std::string DescribeSample(net::Session& s, const net::PreparedPtr& path_query, SampleKey k);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_SAMPLE_ROW_H_
