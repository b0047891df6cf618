// Copyright (c) cqlstream authors.
//
// The rows of an attached dataset (store/attached.h) as a reader receives
// them: the key snapshot's row of a sample (its foreign key), and the
// foreign table's data row (its data blob and label). This is the pure,
// socket-free part of reading an attached sample, as store/sample_row.h is
// for native ones: the loader feeds it the cells its frame decoder streams
// (and places the data blob where its slot is); the fuzzer
// (tests/fuzz/attached_row_fuzz.cc) feeds it arbitrary cells.
//
// Nothing in a row is trusted: a malformed row is a per-sample error naming
// the sample and the table, never a write outside the sample's region or an
// unbounded allocation.
//
//   snapshot answer := exactly one row: seg, idx (the sample's), key blob
//     key  : 1..kMaxAttachedKeyBytes bytes that decode as the key type
//            (uuid/timeuuid 16, bigint 8, int 4, text UTF-8, blob any)
//   data answer     := exactly one row (AttachedTable::DataReadCql), its
//                      first cell the key the reader bound (the reader
//                      checks it: the loader's loader::ForeignGroupSink,
//                      verify's ForeignKeyMatches) and its other cells
//                      numbered from 0 here:
//     col 0 data    : blob, not null, at most max_bytes
//     col 1 label   : (when the read selects one) by label type:
//       int         -> label (class: null = -1, else in [0, classes) when
//                      the class count is known)
//       text        -> the index of the text in the class names (any order)
//       list<int>, set<int> -> labels (multilabel; at most
//                      kMaxLabelsPerSample, each in [0, classes) when known)
//       blob        -> the target (label kind target: the payload is data
//                      then target, image_size = the data's length;
//                      data + target at most max_bytes)
//     A label column the dataset's label kind does not use is ignored.
//
// Thread-safety: value types and single-owner objects; no locking. The
// caller serializes the calls on one object.
#ifndef CQLSTREAM_STORE_ATTACHED_ROW_H_
#define CQLSTREAM_STORE_ATTACHED_ROW_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cql/response.h"
#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "cqlstream/value.h"

namespace cqlstream::store {

// The largest foreign key cqlstream binds back (Cassandra's partition key limit).
inline constexpr size_t kMaxAttachedKeyBytes = 64 << 10;

// The columns of AttachedTable::DataReadCql's answer after its key column.
inline constexpr int kAttachedColData = 0, kAttachedColLabel = 1;

// Whether a data answer's key cell is the key a reader bound (`bound`: the
// key as the protocol serializes it), byte for byte; a null cell never is.
bool ForeignKeyMatches(std::optional<std::span<const uint8_t>> cell, std::span<const uint8_t> bound);

// How a label column is read (from AttachedTable::label_type).
enum class AttachedLabelType { kNone, kInt, kIntList, kText, kBlob };
// "" -> kNone, "int", "list<int>"/"set<int>", "text"/"varchar"/"ascii",
// "blob"; anything else is Corruption naming it.
StatusOr<AttachedLabelType> ParseAttachedLabelType(std::string_view label_type);
// The CQL type of a key column (AttachedTable::key_type); Corruption unless
// uuid, timeuuid, bigint, int, text, varchar, ascii or blob.
StatusOr<DataType> AttachedKeyType(std::string_view key_type);

// The columns of KeyLookupCql's answer.
inline constexpr int kSnapshotColSeg = 0, kSnapshotColIdx = 1, kSnapshotColKey = 2;

// One row of a lookup's answer (KeyLookupCql, KeyLookupManyCql): its seg,
// idx and key cells as received (null: absent).
struct SnapshotRowCells {
  std::optional<std::span<const uint8_t>> seg, idx, key;
};

// The key snapshot's answer for `sample` (KeyLookupCql): the foreign key as
// a Value of `key_type`, ready to bind. NotFound when the snapshot has no row
// for the sample, Corruption when the row is malformed or is another
// sample's (its seg and idx cells) or the answer has other columns than
// seg, idx and key; both name the sample and `snapshot_table`. `rows` null
// (not a Rows result) is Corruption too.
StatusOr<Value> SnapshotKey(SampleKey sample, const cql::Rows* rows, const DataType& key_type,
                            const std::string& snapshot_table);
// The same on the answer's row count and its first row's cells (ignored
// when the count is not positive).
StatusOr<Value> SnapshotKeyRow(SampleKey sample, int32_t row_count, const SnapshotRowCells& row,
                               const DataType& key_type, const std::string& snapshot_table);
// The key cell alone (a row already known to be the sample's: a grouped
// lookup's, or a cached key).
StatusOr<Value> SnapshotKeyCell(SampleKey sample, int32_t row_count, std::optional<std::span<const uint8_t>> cell,
                                const DataType& key_type, const std::string& snapshot_table);

// The key cell of each sample a grouped lookup of segment `seg` asked for
// (`asked`: their idx), by idx; a sample the answer does not hold is absent
// (SnapshotKeyCell with a row count of 0 then names it). Corruption naming
// `snapshot_table` and the row when the answer is not what was asked: a
// seg or idx cell that is not a 4-byte int, a row of another segment or of
// a sample not asked for, or the same sample twice. The key cells are
// checked per sample by SnapshotKeyCell. The views point into `rows`' cells.
StatusOr<std::map<int32_t, std::optional<std::span<const uint8_t>>>> GroupedSnapshotKeys(
    int32_t seg, std::span<const int32_t> asked, std::span<const SnapshotRowCells> rows,
    const std::string& snapshot_table);

// A dataset's class names by name. The names are in no particular order
// (attach keeps the old names' indices and appends new ones), so a text
// label's class is looked up here, never by binary search. Built once per
// dataset; a name listed twice keeps its first index.
class ClassNameIndex {
 public:
  explicit ClassNameIndex(const std::vector<std::string>& names);
  // The index of `name` in the names; nullopt when it is not one.
  std::optional<int32_t> Find(std::string_view name) const;
  size_t size() const { return size_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> index_;
  size_t size_ = 0;
};

// What a reader of one attached dataset needs to check its data rows.
struct AttachedRowOptions {
  LabelKind label_kind = LabelKind::kNone;                // the dataset's
  AttachedLabelType label_type = AttachedLabelType::kNone;
  std::shared_ptr<const ClassNameIndex> class_names;     // text labels map into it (null: none)
  int64_t classes = -1;                                   // < 0: unknown
  int64_t max_bytes = int64_t{1} << 30;                   // data (+ target) per sample
  std::string table;                                      // "ks.table", for messages
  bool keep_data = false;                                 // copy a data cell given as a view
  bool keep_target = false;                               // copy a target cell given as a view
};

// The cells of one data answer of sample `sample` (whose foreign key is
// `key`, rendered for messages). Data cells are announced with
// OnDataSize (a reader that places them itself) or handed whole to OnCell.
class AttachedRow {
 public:
  AttachedRow(SampleKey sample, std::string key, const AttachedRowOptions* options)
      : sample_(sample), key_(std::move(key)), o_(options) {}

  void OnRowsBegin(int32_t rows) { rows_ = rows; }
  // The length of the data cell (row 0) before its bytes are placed
  // elsewhere; bounded by max_bytes (else status() fails).
  void OnDataSize(int32_t row, int64_t size);
  // The target cell's length before its bytes are placed (label kind target).
  // A reader places a target only after the data: while data_size() < 0 (no
  // data cell yet, or a null one) it has no place, and status() fails.
  void OnTargetSize(int32_t row, int64_t size);
  // A complete cell of column `col`; `data`: the cell (nullopt for null).
  // For a data/target cell that was announced and placed, the view is the
  // placed bytes (not copied again).
  void OnCell(int32_t row, int32_t col, std::optional<std::span<const uint8_t>> data);

  // After the answer: OK, or the first problem: NotFound (no row) or
  // Corruption (several rows, a null or oversized data cell, a malformed or
  // out-of-range label), naming the sample, its key and the table.
  Status Finish() const;
  // The first problem seen so far (OK while none).
  const Status& status() const { return status_; }
  const AttachedRowOptions& options() const { return *o_; }

  int32_t rows() const { return rows_; }
  const std::string& key() const { return key_; }       // as given, for messages
  int64_t data_size() const { return data_size_; }      // -1 until seen
  int64_t target_size() const { return target_size_; }  // -1: none (null or not a target dataset)
  int64_t payload_size() const { return data_size_ + std::max<int64_t>(target_size_, 0); }
  int32_t label() const { return label_; }
  const std::vector<int32_t>& labels() const { return labels_; }
  // The image size of the payload: the data's length for target datasets, else -1.
  int64_t image_size() const { return o_->label_kind == LabelKind::kTarget ? data_size_ : -1; }
  // keep_data / keep_target: the bytes of cells given whole to OnCell.
  std::span<const uint8_t> kept_data() const { return kept_data_; }
  std::span<const uint8_t> kept_target() const { return kept_target_; }

 private:
  void Fail(std::string what);
  void OnLabel(std::optional<std::span<const uint8_t>> data);
  void OnClassLabel(std::optional<std::span<const uint8_t>> data);
  void OnMultiLabel(std::optional<std::span<const uint8_t>> data);
  std::optional<int32_t> IntLabel(std::optional<std::span<const uint8_t>> data);
  std::string ClassRange() const;
  bool UsesTarget() const {
    return o_->label_kind == LabelKind::kTarget && o_->label_type == AttachedLabelType::kBlob;
  }

  SampleKey sample_;
  std::string key_;
  const AttachedRowOptions* o_;
  int32_t rows_ = -1;
  int64_t data_size_ = -1;
  int64_t target_size_ = -1;
  int32_t label_ = -1;
  std::vector<int32_t> labels_;
  std::vector<uint8_t> kept_data_, kept_target_;
  Status status_;
};

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_ATTACHED_ROW_H_
