// Copyright (c) cqlstream authors.
//
// The demultiplexer of a foreign read of an attached dataset (no sockets
// here): the answer to store::AttachedTable::DataReadManyCql, rows of (key,
// data[, label]) in the server's order, for samples of one split whose
// foreign keys were asked for in one `"<key>" IN ?`; or, as a group of one,
// the answer to DataReadCql (`"<key>" = ?`, the same columns), so that a
// single read's row is checked to be of the key it asked for too.
//
// Each row goes to the member whose foreign key (the key cell's bytes as the
// protocol serializes the key type, compared byte for byte) is the row's
// first cell, as that member's row 0, 1, ..., with the cells after the key
// numbered from 0: the columns of a single-sample DataReadCql answer, so
// that the member's own checks (store::AttachedRow) apply unchanged. A
// member's OnRowsBegin is called once, before its first cell, with a row
// count of 1; rows_of() gives the count the answer held in the end, which
// the caller hands on (a member given two rows must fail as a single read
// of two rows does).
// An answer of another column count, a row whose key was not asked for, a
// null key cell, or a row whose first cell is not its key fails the whole
// answer (error()); from then on no cell is passed to any member and no
// destination is handed out, so an answer can never write into another
// sample's memory.
//
// Ownership: holds the member sinks (shared with the loader's attempt).
// Thread-safety: a single-owner object (one answer's decoder); no locking.
#ifndef CQLSTREAM_LOADER_FOREIGN_GROUP_SINK_H_
#define CQLSTREAM_LOADER_FOREIGN_GROUP_SINK_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cql/frame_decoder.h"
#include "cqlstream/status.h"

namespace cqlstream::loader {

class ForeignGroupSink final : public cql::CellSink {
 public:
  struct Member {
    std::string key;  // the serialized foreign key
    std::shared_ptr<cql::CellSink> sink;
  };
  // `members`: distinct keys (the loader reads a repeated key alone).
  // `columns`: the columns the read selects (key, data[, label]: 2 or 3);
  // an answer of another count (one meant for another request) fails as a
  // whole before any cell is passed.
  ForeignGroupSink(std::vector<Member> members, int32_t columns);

  Status OnRowsBegin(const cql::RowsMetadata& metadata, int32_t rows) override;
  std::span<uint8_t> CellDestination(int32_t row, int32_t col, int32_t size) override;
  Status OnCell(int32_t row, int32_t col, std::optional<cql::ByteView> data) override;
  void OnCellAbandoned(int32_t row, int32_t col) override;

  // The first problem of the answer as a whole, or OK.
  const Status& error() const { return err_; }
  // Rows passed to member `i` (0: the answer did not hold its key).
  int32_t rows_of(size_t i) const { return rows_[i]; }
  size_t size() const { return members_.size(); }

 private:
  void Fail(std::string what);

  std::vector<Member> members_;
  int32_t columns_;
  std::unordered_map<std::string, size_t> by_key_;  // key -> index in members_
  std::vector<int32_t> rows_;                       // by index
  cql::RowsMetadata metadata_;
  // The row being read and its member, once its key cell named one.
  int32_t row_ = -1;
  std::optional<size_t> member_;
  int32_t member_row_ = 0;
  Status err_;
};

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_FOREIGN_GROUP_SINK_H_
