// Copyright (c) cqlstream authors.
#include "store/meta_scan_order.h"

#include <fmt/format.h>

#include <array>
#include <span>
#include <tuple>
#include <vector>

#include "cql/wire.h"
#include "net/routing/murmur3.h"
#include "store/scan.h"

namespace cqlstream::store {
namespace {

// The token of partition (seg, block): the ints big-endian, as a composite
// partition key (net/routing/murmur3.h).
int64_t PartitionToken(int32_t seg, int32_t block) {
  std::array<uint8_t, 4> s{}, b{};
  cql::StoreU32(s.data(), static_cast<uint32_t>(seg));
  cql::StoreU32(b.data(), static_cast<uint32_t>(block));
  // Two 4-byte components: RoutingKey cannot fail on them.
  return routing::PartitionKeyToken({std::span<const uint8_t>(s), std::span<const uint8_t>(b)}).value();
}

}  // namespace

std::string MetaScanOrder::Where() const {
  return fmt::format("the metadata scan of {} over tokens ({}, {}]", table_, start_, end_);
}

Status MetaScanOrder::Row(int32_t seg, int32_t block, int32_t idx) {
  if (idx < 0 || (idx >> kBlockShift) != block) {
    return Status::Corruption(
        fmt::format("{} answered idx {} in block {} of segment {}: not an idx of that block", Where(), idx, block, seg));
  }
  if (rows_ > 0 && seg == seg_ && block == block_) {
    if (idx <= idx_) {
      return Status::Corruption(fmt::format("{} answered idx {} of segment {} block {} after idx {}: a repeated or "
                                            "foreign page",
                                            Where(), idx, seg, block, idx_));
    }
  } else {
    const int64_t t = PartitionToken(seg, block);
    if (t <= start_ || t > end_) {
      return Status::Corruption(fmt::format("{} answered a row of segment {} block {}, whose token {} is outside the "
                                            "range",
                                            Where(), seg, block, t));
    }
    const auto key = [](int32_t sg, int32_t bl) {
      return std::make_tuple(static_cast<uint32_t>(sg), static_cast<uint32_t>(bl));
    };
    if (rows_ > 0 && (t < token_ || (t == token_ && key(seg, block) <= key(seg_, block_)))) {
      return Status::Corruption(fmt::format("{} answered segment {} block {} (token {}) after segment {} block {} "
                                            "(token {}): a repeated or foreign page",
                                            Where(), seg, block, t, seg_, block_, token_));
    }
    token_ = t;
  }
  seg_ = seg;
  block_ = block;
  idx_ = idx;
  ++rows_;
  return Status::OK();
}

Status MetaScanOrder::Page(const cql::Rows& rows) {
  for (int32_t i = 0; i < rows.row_count(); ++i) {
    CQLS_ASSIGN_OR_RETURN(int32_t seg, rows.Get<int32_t>(i, 0));
    CQLS_ASSIGN_OR_RETURN(int32_t block, rows.Get<int32_t>(i, 1));
    CQLS_ASSIGN_OR_RETURN(int32_t idx, rows.Get<int32_t>(i, 2));
    CQLS_RETURN_IF_ERROR(Row(seg, block, idx));
  }
  return Status::OK();
}

}  // namespace cqlstream::store
