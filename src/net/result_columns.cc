// Copyright (c) cqlstream authors.
#include "net/result_columns.h"

#include <fmt/format.h>

#include <string>
#include <vector>

namespace cqlstream::net {
namespace {

bool SameColumn(const cql::ColumnSpec& a, const cql::ColumnSpec& b) {
  return a.keyspace == b.keyspace && a.table == b.table && a.name == b.name && a.type == b.type;
}

// "ks.table(name type, ...)", or "no column metadata"; at most 8 columns
// named, so that a hostile answer cannot make the message large.
std::string Describe(const cql::RowsMetadata& md) {
  if (md.columns.empty()) {
    return md.column_count > 0 ? fmt::format("{} columns without metadata", md.column_count) : "no columns";
  }
  const auto& first = md.columns.front();
  std::string out = fmt::format("{}.{}(", first.keyspace, first.table);
  constexpr size_t kNamed = 8;
  for (size_t i = 0; i < md.columns.size() && i < kNamed; ++i) {
    const auto& c = md.columns[i];
    if (i > 0) out += ", ";
    if (c.keyspace != first.keyspace || c.table != first.table) out += fmt::format("{}.{}.", c.keyspace, c.table);
    out += fmt::format("{} {}", c.name, c.type.ToString());
  }
  if (md.columns.size() > kNamed) out += fmt::format(", ... {} more", md.columns.size() - kNamed);
  return out + ")";
}

}  // namespace

Status CheckResultColumns(const PreparedStatement& prepared, const cql::RowsMetadata& answer, std::string_view host) {
  const auto& want = prepared.result_metadata.columns;
  bool same = answer.columns.size() == want.size() && static_cast<size_t>(answer.column_count) == want.size();
  for (size_t i = 0; same && i < want.size(); ++i) same = SameColumn(answer.columns[i], want[i]);
  if (same) return Status::OK();
  return Status::Corruption(fmt::format("{} answered '{}' with the columns {}, not the {} it was prepared with",
                                        host, prepared.query, Describe(answer), Describe(prepared.result_metadata)));
}

Status ColumnCheckingSink::OnRowsBegin(const cql::RowsMetadata& metadata, int32_t row_count) {
  CQLS_RETURN_IF_ERROR(CheckResultColumns(*prepared_, metadata, host_));
  return inner_->OnRowsBegin(metadata, row_count);
}

}  // namespace cqlstream::net
