// Copyright (c) cqlstream authors.
//
// KeyScanOrder: whether the pages of one token-range scan of a foreign
// table (store/key_snapshot.h: SELECT token("<key>"), "<key>", ... WHERE
// token("<key>") > start AND token("<key>") <= end) answer that range, each
// key once. A server returns a range's partitions in ring order, (token,
// key bytes) strictly ascending (keys of equal tokens by their unsigned
// bytes), so a row whose token lies outside the range, or that does not
// come after the previous row, belongs to another request's answer or
// repeats one (a page answered twice): written into the key snapshot it
// would give a sample twice, or another split's, every epoch.
//
// Thread-safety: none (one scan of one range uses one). Ownership: a value
// type; it keeps a copy of the last key (the largest key cell seen).
#ifndef CQLSTREAM_STORE_KEY_SCAN_ORDER_H_
#define CQLSTREAM_STORE_KEY_SCAN_ORDER_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cql/response.h"
#include "cqlstream/status.h"

namespace cqlstream::store {

class KeyScanOrder {
 public:
  // The range (start, end]; `table` names the foreign table in messages.
  KeyScanOrder(int64_t start, int64_t end, std::string table)
      : start_(start), end_(end), table_(std::move(table)) {}

  // One row: its token cell (a bigint: 8 bytes) and its key cell. OK when
  // the token is in the range and the row comes after every row before it;
  // a Corruption naming the range and the row otherwise (a null or
  // malformed token or a null key included).
  Status Row(std::optional<std::span<const uint8_t>> token, std::optional<std::span<const uint8_t>> key);
  // Every row of a page whose columns are token, key, ...
  Status Page(const cql::Rows& rows);

  int64_t rows() const { return rows_; }

 private:
  int64_t start_, end_;
  std::string table_;
  int64_t rows_ = 0;
  int64_t last_token_ = 0;
  std::vector<uint8_t> last_key_;
};

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_KEY_SCAN_ORDER_H_
