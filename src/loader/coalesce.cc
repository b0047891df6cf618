// Copyright (c) cqlstream authors.
#include "loader/coalesce.h"

#include <fmt/format.h>

#include <algorithm>

#include "cqlstream/value.h"
#include "store/sample_row.h"

namespace cqlstream::loader {

bool Coalescible(int64_t seg_max_size, int32_t chunk_size) {
  return chunk_size > 0 && seg_max_size >= 0 && seg_max_size <= chunk_size && seg_max_size <= kCoalesceMaxSampleBytes;
}

Status CheckCoalesceOption(int option) {
  if (option < 0 || option > kMaxCoalesce) {
    return Status::InvalidArgument(fmt::format(
        "coalesce must be 0 (automatic), 1 (off) or at most {} keys per request, got {}", kMaxCoalesce, option));
  }
  return Status::OK();
}

size_t GroupLimitForSize(int64_t seg_max_size) {
  if (seg_max_size <= 0) return 0;
  return static_cast<size_t>(std::max<int64_t>(1, kCoalesceMaxGroupBytes / seg_max_size));
}

int CoalesceCap(int option, int window) {
  const int want = option == 0 ? kDefaultCoalesce : option;
  return std::max(1, std::min(want, window / 4));
}

CoalescedSink::CoalescedSink(std::vector<Member> members) : members_(std::move(members)), rows_(members_.size(), 0) {
  by_key_.reserve(members_.size());
  for (size_t i = 0; i < members_.size(); ++i) by_key_.emplace_back(members_[i].key, i);
  std::sort(by_key_.begin(), by_key_.end());
}

void CoalescedSink::Fail(std::string what) {
  if (err_.ok()) err_ = Status::Corruption(std::move(what));
  member_.reset();
}

Status CoalescedSink::OnRowsBegin(const cql::RowsMetadata&, int32_t rows) {
  rows_total_ = rows;
  return Status::OK();
}

std::span<uint8_t> CoalescedSink::CellDestination(int32_t row, int32_t col, int32_t size) {
  if (!err_.ok() || row != row_ || !member_ || col <= store::kColIdx) return {};
  return members_[*member_].sink->CellDestination(member_row_, col, size);
}

// Only a cell CellDestination passed on to a member can be abandoned.
void CoalescedSink::OnCellAbandoned(int32_t row, int32_t col) {
  if (row == row_ && member_) members_[*member_].sink->OnCellAbandoned(member_row_, col);
}

Status CoalescedSink::OnCell(int32_t row, int32_t col, std::optional<cql::ByteView> data) {
  if (!err_.ok()) return Status::OK();
  if (row != row_) {
    // A new row: its key cells come first.
    row_ = row;
    seg_.reset();
    member_.reset();
  }
  if (col == store::kColSeg) {
    seg_ = data ? DecodeIntCell(*data) : std::nullopt;
    if (!seg_) Fail(fmt::format("row {} of a coalesced answer has no int seg", row));
    return Status::OK();
  }
  if (col == store::kColIdx) {
    const std::optional<int32_t> idx = data ? DecodeIntCell(*data) : std::nullopt;
    if (!seg_ || !idx) {
      Fail(fmt::format("row {} of a coalesced answer has no int idx", row));
      return Status::OK();
    }
    const SampleKey key = MakeKey(*seg_, *idx);
    auto it = std::lower_bound(by_key_.begin(), by_key_.end(), std::make_pair(key, size_t{0}));
    if (it == by_key_.end() || it->first != key) {
      Fail(fmt::format("a coalesced answer carries sample {}, which it was not asked for", FormatKey(key)));
      return Status::OK();
    }
    member_ = it->second;
    member_row_ = rows_[*member_]++;
    // The member checks the key itself, as in a single-sample answer.
    uint8_t seg_cell[4] = {static_cast<uint8_t>(*seg_ >> 24), static_cast<uint8_t>(*seg_ >> 16),
                           static_cast<uint8_t>(*seg_ >> 8), static_cast<uint8_t>(*seg_)};
    auto& sink = *members_[*member_].sink;
    CQLS_RETURN_IF_ERROR(sink.OnCell(member_row_, store::kColSeg, cql::ByteView(seg_cell, 4)));
    return sink.OnCell(member_row_, store::kColIdx, data);
  }
  if (!member_) return Status::OK();  // a cell before the row's key cells: not placed
  return members_[*member_].sink->OnCell(member_row_, col, data);
}

}  // namespace cqlstream::loader
