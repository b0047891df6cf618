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
//   chunks  : each <= chunk_size; only the last may be shorter (a null or
//             empty data cell is a chunk of no bytes: last, if at all);
//             their sum == size
//
// Thread-safety: value types and single-owner objects; no locking. The
// caller serializes the calls on one object.
#ifndef CQLSTREAM_STORE_SAMPLE_ROW_H_
#define CQLSTREAM_STORE_SAMPLE_ROW_H_

#include <xxhash.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cql/response.h"
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

// The hints for a sample of `d` in a segment whose max_size is `max_size`
// (< 0: unknown): chunk size, label kind and class count from the dataset.
SampleHints HintsFor(const DatasetInfo& d, int64_t max_size);

// The static columns of a data row (taken from the first row of an answer).
struct SampleStatics {
  bool present = false;  // the size column was there (not null)
  int64_t size = -1;
  int64_t image_size = -1;  // -1: null (the whole payload is the image)
  int64_t checksum = 0;
  bool checksum_present = false;  // the checksum column was there (not null)
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
  // or follows a shorter chunk or one of no bytes (a chunk is missing or out
  // of place).
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

// The buffered decoder of the data read (verify, export): the whole answer
// of one sample, page by page, as the loader's streaming path reads it: key
// and static cells through SampleRowCells, the statics checked against the
// hints (CheckStatics) at the first chunk, every chunk placed by ChunkPlacer
// and, with keep_bytes, copied into a buffer of exactly the declared size
// (allocated once the size passed the hints: set hints.max_size to bound
// it). Every chunk is also counted and hashed (xxh64, in order), whatever
// the row says, so that a caller can describe a bad sample (of the pages
// fed: ReadSampleRows stops at a problem).
//
// Single owner; not copyable.
class SampleRowDecoder {
 public:
  SampleRowDecoder(SampleKey key, const SampleHints& hints, bool keep_bytes);
  SampleRowDecoder(const SampleRowDecoder&) = delete;
  SampleRowDecoder& operator=(const SampleRowDecoder&) = delete;

  // One page of DataReadQuery's answer (its columns in kCol* order).
  void AddPage(const cql::Rows& page);
  // The same, cell by cell: BeginPage() before each page, then every cell
  // of every row in column order (the data cell last).
  void BeginPage();
  void OnCell(int32_t row, int32_t col, std::optional<std::span<const uint8_t>> cell);

  // After the last page: OK, or the first problem (Corruption naming the
  // sample: another sample's key, a malformed static cell, statics the hints
  // refuse, a chunk out of place, chunks that do not add up to the size). An
  // answer without rows is OK here: see rows().
  Status Finish();
  // A problem was found already (the answer so far; Finish() adds the
  // check that the chunks add up).
  bool failed() const { return !status_.ok(); }
  // The first problem was a row of another sample's key: an answer meant
  // for another request, worth reading again (store/read_again.h).
  bool answered_another_key() const { return another_key_; }
  // Back to the state of construction (the same key, hints and keep_bytes),
  // for a read sent again.
  void Reset();

  int32_t rows() const { return rows_; }
  const SampleStatics& statics() const { return statics_; }
  int64_t data_bytes() const { return data_bytes_; }  // every chunk's length, summed
  uint64_t xxh64() const { return XXH64_digest(hash_.get()); }
  // keep_bytes, after Finish() returned OK: the sample's bytes.
  std::span<const uint8_t> bytes() const;

 private:
  void OnData(std::optional<std::span<const uint8_t>> cell);
  bool CellsOk();

  SampleKey key_;
  SampleHints hints_;
  bool keep_bytes_;
  std::optional<SampleRowCells> cells_;  // of the current page
  int32_t rows_ = 0;
  bool claimed_ = false;
  SampleStatics statics_;
  ChunkPlacer placer_;
  std::unique_ptr<uint8_t[]> buf_;
  int64_t data_bytes_ = 0;
  std::unique_ptr<XXH64_state_t, XXH_errorcode (*)(XXH64_state_t*)> hash_;
  Status status_;
  bool another_key_ = false;
};

// --- statements of the data row (layout 1; sample_row_io.cc) --------------
// The data read of one sample (docs/schema.md): bound values seg, idx;
// columns
//   0 seg int, 1 idx int, 2 size bigint, 3 image_size bigint,
//   4 checksum bigint, 5 label int, 6 labels list<int>, 7 data blob;
// one row per chunk, in chunk order. The key columns come first so that a
// reader can check that an answer belongs to the sample it asked for before
// any data byte is placed.
std::string DataReadQuery(const DatasetInfo& d);
// The same columns for several samples of one segment (coalesced reads of
// one-row samples, loader/coalesce.h): bound values seg int, idx list<int>;
// the rows of the listed samples that exist, in the server's order.
std::string DataReadManyQuery(const DatasetInfo& d);
// Reads sample `key` with `data_read` (DataReadQuery prepared) at
// LOCAL_QUORUM, `page_size` chunks a page, into `dec`: the reads of verify,
// export and the pack builder. The answers must name the data read's
// columns (net/result_columns.h). An answer meant for another request —
// refused for its columns (a Corruption), or holding a row of another
// sample's key (dec->answered_another_key()) — is read again, `dec` reset
// first, kReadAttempts in all (store/read_again.h); after the last, a
// refused or failed page is the error and another key's row is dec's
// problem (Finish), as for an answer read once. The pages stop at the first
// one after which dec holds a problem (dec->failed(): its counts then cover
// the pages read only), so that rows paged without end cannot keep a
// reader asking. `stop` (optional; e.g. store/progress.h's interrupt flag)
// is looked at after each page, before each answer read again and while a
// page is waited for (every 50 ms: net::Session::Execute): once set, the
// read ends with Cancelled("interrupted"), a page not yet in hand given up
// (dec then covers the pages read; before an answer read again, it still
// holds the refused one), so that neither a large sample served slowly nor
// a page a server holds keeps an interrupted command waiting. (Callers look
// at it before a sample's read.)
Status ReadSampleRows(net::Session& s, const net::PreparedPtr& data_read, SampleKey key, int page_size,
                      SampleRowDecoder* dec, const std::atomic<bool>* stop = nullptr);
inline constexpr int kColSeg = 0, kColIdx = 1, kColSize = 2, kColImageSize = 3, kColChecksum = 4, kColLabel = 5,
                     kColLabels = 6, kColData = 7;
// Writers insert a sample's chunks with these (the static columns ride with
// one chunk: docs/schema.md):
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
