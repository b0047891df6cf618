// Copyright (c) cqlstream authors.
//
// MetaScanOrder: whether the pages of one token-range scan of a metadata
// table (store/scan.h ScanMetaByTokenRanges: SELECT seg, block, idx, ...
// FROM m_<x> WHERE token(seg, block) > start AND token(seg, block) <= end)
// answer that range, each row once. A server returns a range's partitions
// in ring order: by token, then (for equal tokens) by the partition key's
// bytes, here seg then block as unsigned big-endian ints; and a
// partition's rows by idx, ascending. So a row whose partition's token
// (computed here from seg and block, not taken from the server) lies
// outside the range, that does not come after the row before it, or whose
// idx lies outside its block belongs to another request's answer or
// repeats one (a page answered twice): counted, it would count a sample
// twice (`info`'s class counts).
//
// Thread-safety: none (one scan of one range uses one). Ownership: a value
// type.
#ifndef CQLSTREAM_STORE_META_SCAN_ORDER_H_
#define CQLSTREAM_STORE_META_SCAN_ORDER_H_

#include <cstdint>
#include <string>
#include <utility>

#include "cql/response.h"
#include "cqlstream/status.h"

namespace cqlstream::store {

class MetaScanOrder {
 public:
  // The range (start, end]; `table` names the metadata table in messages.
  MetaScanOrder(int64_t start, int64_t end, std::string table)
      : start_(start), end_(end), table_(std::move(table)) {}

  // One row's key. OK when it comes next in the range's order; a
  // Corruption naming the range and the row otherwise.
  Status Row(int32_t seg, int32_t block, int32_t idx);
  // Every row of a page whose first columns are seg, block and idx (ints:
  // another type, or a null, is an error naming the column).
  Status Page(const cql::Rows& rows);

  int64_t rows() const { return rows_; }

 private:
  std::string Where() const;

  int64_t start_, end_;
  std::string table_;
  int64_t rows_ = 0;
  // The last row's partition, its token, and its idx.
  int32_t seg_ = 0, block_ = 0, idx_ = 0;
  int64_t token_ = 0;
};

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_META_SCAN_ORDER_H_
