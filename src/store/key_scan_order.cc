// Copyright (c) cqlstream authors.
#include "store/key_scan_order.h"

#include <fmt/format.h>

#include <algorithm>

#include "cql/wire.h"

namespace cqlstream::store {

Status KeyScanOrder::Row(std::optional<std::span<const uint8_t>> token, std::optional<std::span<const uint8_t>> key) {
  const auto where = [&] { return fmt::format("the key scan of {} over tokens ({}, {}]", table_, start_, end_); };
  if (!token || token->size() != 8) {
    return Status::Corruption(fmt::format("{} answered row {} with a token cell of {}", where(), rows_,
                                          token ? fmt::format("{} bytes", token->size()) : std::string("null")));
  }
  if (!key) return Status::Corruption(fmt::format("{} answered row {} without a key", where(), rows_));
  const auto t = static_cast<int64_t>(cql::LoadU64(token->data()));
  if (t <= start_ || t > end_) {
    return Status::Corruption(fmt::format("{} answered a row of token {}, outside the range", where(), t));
  }
  if (rows_ > 0) {
    const bool after = t > last_token_ || (t == last_token_ && std::lexicographical_compare(last_key_.begin(),
                                                                                           last_key_.end(),
                                                                                           key->begin(), key->end()));
    if (!after) {
      return Status::Corruption(fmt::format(
          "{} answered a row of token {} after one of token {}: a repeated or foreign page", where(), t, last_token_));
    }
  }
  last_token_ = t;
  last_key_.assign(key->begin(), key->end());
  ++rows_;
  return Status::OK();
}

Status KeyScanOrder::Page(const cql::Rows& rows) {
  if (rows.row_count() > 0 && rows.column_count() < 2) {
    return Status::Corruption(fmt::format("the key scan of {} answered {} columns, not token and key", table_,
                                          rows.column_count()));
  }
  for (int32_t i = 0; i < rows.row_count(); ++i) CQLS_RETURN_IF_ERROR(Row(rows.cell(i, 0), rows.cell(i, 1)));
  return Status::OK();
}

}  // namespace cqlstream::store
