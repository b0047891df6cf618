// Copyright (c) cqlstream authors.
#include "net/result_columns.h"

#include <fmt/format.h>

#include <string>
#include <vector>

namespace cqlstream::net {
namespace {

// An identifier of an answer for a message: at most 64 bytes.
std::string Cut(const std::string& s) {
  constexpr size_t kMax = 64;
  return s.size() <= kMax ? s : s.substr(0, kMax) + "...";
}

}  // namespace

bool SameResultColumns(const cql::RowsMetadata& a, const cql::RowsMetadata& b) {
  return a.column_count == b.column_count && a.columns == b.columns;
}

std::string DescribeColumns(const cql::RowsMetadata& md) {
  if (md.columns.empty()) {
    return md.column_count > 0 ? fmt::format("{} columns without metadata", md.column_count) : "no columns";
  }
  const auto& first = md.columns.front();
  std::string out = fmt::format("{}.{}(", Cut(first.keyspace), Cut(first.table));
  constexpr size_t kNamed = 8;
  for (size_t i = 0; i < md.columns.size() && i < kNamed; ++i) {
    const auto& c = md.columns[i];
    if (i > 0) out += ", ";
    if (c.keyspace != first.keyspace || c.table != first.table) out += fmt::format("{}.{}.", Cut(c.keyspace), Cut(c.table));
    out += fmt::format("{} {}", Cut(c.name), Cut(c.type.ToString()));
  }
  if (md.columns.size() > kNamed) out += fmt::format(", ... {} more", md.columns.size() - kNamed);
  return out + ")";
}

Status CheckResultColumns(const PreparedStatement& prepared, const cql::RowsMetadata& answer, const Host& host) {
  if (SameResultColumns(answer, prepared.result_metadata)) return Status::OK();
  return Status::Corruption(fmt::format("{} answered '{}' with the columns {}, not the {} it was prepared with",
                                        host.endpoint(), prepared.query, DescribeColumns(answer),
                                        DescribeColumns(prepared.result_metadata)));
}

Status ColumnCheckingSink::OnRowsBegin(const cql::RowsMetadata& metadata, int32_t row_count) {
  // specs_matched: the decoder found this statement's own spec bytes
  // (ExpectedColumns), which decode to its columns; a match against any
  // other expectation is no match here.
  if (metadata.specs_matched != &prepared_->result_metadata) {
    CQLS_RETURN_IF_ERROR(CheckResultColumns(*prepared_, metadata, *host_));
    if (decoded_) decoded_->fetch_add(1, std::memory_order_relaxed);
  }
  return inner_->OnRowsBegin(metadata, row_count);
}

}  // namespace cqlstream::net
