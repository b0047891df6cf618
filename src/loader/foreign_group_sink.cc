// Copyright (c) cqlstream authors.
#include "loader/foreign_group_sink.h"

#include <fmt/format.h>

#include <algorithm>

namespace cqlstream::loader {
namespace {

// A key for messages: its first bytes in hex.
std::string KeyHex(cql::ByteView key) {
  std::string s;
  for (size_t i = 0; i < key.size() && i < 24; ++i) s += fmt::format("{:02x}", key[i]);
  if (key.size() > 24) s += "...";
  return s.empty() ? "(empty)" : s;
}

}  // namespace

ForeignGroupSink::ForeignGroupSink(std::vector<Member> members, int32_t columns)
    : members_(std::move(members)), columns_(columns), rows_(members_.size(), 0) {
  by_key_.reserve(members_.size());
  for (size_t i = 0; i < members_.size(); ++i) by_key_.emplace(members_[i].key, i);
}

void ForeignGroupSink::Fail(std::string what) {
  if (err_.ok()) err_ = Status::Corruption(std::move(what));
  member_.reset();
}

Status ForeignGroupSink::OnRowsBegin(const cql::RowsMetadata& metadata, int32_t) {
  metadata_ = metadata;
  if (metadata.column_count != columns_) {
    Fail(fmt::format("a foreign read answers {} columns, not the {} it asked for (key, data[, label])",
                     metadata.column_count, columns_));
  }
  return Status::OK();
}

std::span<uint8_t> ForeignGroupSink::CellDestination(int32_t row, int32_t col, int32_t size) {
  if (!err_.ok() || row != row_ || !member_ || col < 1) return {};
  return members_[*member_].sink->CellDestination(member_row_, col - 1, size);
}

// Only a cell CellDestination passed on to a member can be abandoned.
void ForeignGroupSink::OnCellAbandoned(int32_t row, int32_t col) {
  if (row == row_ && member_ && col >= 1) members_[*member_].sink->OnCellAbandoned(member_row_, col - 1);
}

Status ForeignGroupSink::OnCell(int32_t row, int32_t col, std::optional<cql::ByteView> data) {
  if (!err_.ok()) return Status::OK();
  if (row != row_) {
    // A new row: its key cell comes first.
    row_ = row;
    member_.reset();
    if (col != 0) {
      Fail(fmt::format("row {} of a foreign read does not start with its key", row));
      return Status::OK();
    }
  }
  if (col == 0) {
    if (member_) {
      Fail(fmt::format("row {} of a foreign read has two key cells", row));
      return Status::OK();
    }
    if (!data) {
      Fail(fmt::format("row {} of a foreign read has a null key", row));
      return Status::OK();
    }
    auto it = by_key_.find(std::string(reinterpret_cast<const char*>(data->data()), data->size()));
    if (it == by_key_.end()) {
      Fail(fmt::format("a foreign read answers key {}, which it was not asked for", KeyHex(*data)));
      return Status::OK();
    }
    member_ = it->second;
    member_row_ = rows_[*member_]++;
    if (member_row_ == 0) return members_[*member_].sink->OnRowsBegin(metadata_, 1);
    return Status::OK();
  }
  if (!member_) return Status::OK();
  return members_[*member_].sink->OnCell(member_row_, col - 1, data);
}

}  // namespace cqlstream::loader
