// Copyright (c) cqlstream authors.
//
// libFuzzer target for the metadata scan's row checks
// (store/meta_scan_order.h): a token range of any bounds, then rows of
// (seg, block, idx), fed one by one as pages deliver them.
//
// Checked: nothing throws or traps (ASan/UBSan); a row is accepted exactly
// when its idx lies in its block, its partition's token lies in (start,
// end], and it comes after the last accepted row: the same partition with
// a larger idx, or a partition after it by (token, seg, block as unsigned
// ints) (tracked here independently: both a refusal of such a row and an
// acceptance of another abort); a refusal is a Corruption with a message
// and leaves the count unchanged; rows() counts the accepted rows.
//
// Input (FuzzedDataProvider): the whole ring or start and end, then rows until the input ends;
// a row most often stays near the last one (its partition, the next
// block, a nearby idx), so that the order checks are reached.
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <tuple>

#include "cql/wire.h"
#include "fuzz_check.h"
#include "net/routing/murmur3.h"
#include "store/meta_scan_order.h"
#include "store/scan.h"

namespace {

using cqlstream::fuzz::Check;

int64_t TokenOf(int32_t seg, int32_t block) {
  std::array<uint8_t, 4> s{}, b{};
  cqlstream::cql::StoreU32(s.data(), static_cast<uint32_t>(seg));
  cqlstream::cql::StoreU32(b.data(), static_cast<uint32_t>(block));
  return cqlstream::routing::PartitionKeyToken({std::span<const uint8_t>(s), std::span<const uint8_t>(b)}).value();
}

struct Last {
  int64_t token;
  int32_t seg, block, idx;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  // Half the inputs scan the whole ring, where most rows are in range.
  const bool whole_ring = in.ConsumeBool();
  const auto start = whole_ring ? std::numeric_limits<int64_t>::min() : in.ConsumeIntegral<int64_t>();
  const auto end = whole_ring ? std::numeric_limits<int64_t>::max() : in.ConsumeIntegral<int64_t>();
  constexpr int kShift = cqlstream::store::kBlockShift;
  cqlstream::store::MetaScanOrder order(start, end, "ks.m_t");
  int64_t accepted = 0;
  std::optional<Last> last;
  while (in.remaining_bytes() > 0) {
    int32_t seg = 0, block = 0, idx = 0;
    if (last && in.ConsumeBool()) {
      seg = static_cast<int32_t>(static_cast<uint32_t>(last->seg) + in.ConsumeIntegralInRange<uint32_t>(0, 2) - 1);
      block = static_cast<int32_t>(static_cast<uint32_t>(last->block) + in.ConsumeIntegralInRange<uint32_t>(0, 2) - 1);
      idx = static_cast<int32_t>(static_cast<uint32_t>(last->idx) + in.ConsumeIntegralInRange<uint32_t>(0, 4) - 2);
    } else {
      seg = in.ConsumeIntegral<int32_t>();
      block = in.ConsumeIntegralInRange<int32_t>(-2, 1 << 21);
      idx = in.ConsumeBool() ? static_cast<int32_t>((static_cast<uint32_t>(block) << kShift) +
                                                    in.ConsumeIntegralInRange<uint32_t>(0, (1u << kShift) + 1) - 1)
                             : in.ConsumeIntegral<int32_t>();
    }
    // The spec, independently of the code under test.
    bool expected = idx >= 0 && (idx >> kShift) == block;
    const int64_t t = TokenOf(seg, block);
    if (expected) {
      if (last && seg == last->seg && block == last->block) {
        expected = idx > last->idx;
      } else {
        expected = t > start && t <= end &&
                   (!last || std::make_tuple(t, static_cast<uint32_t>(seg), static_cast<uint32_t>(block)) >
                                 std::make_tuple(last->token, static_cast<uint32_t>(last->seg),
                                                 static_cast<uint32_t>(last->block)));
      }
    }
    const cqlstream::Status s = order.Row(seg, block, idx);
    Check(s.ok() == expected);
    if (s.ok()) {
      last = Last{t, seg, block, idx};
      ++accepted;
    } else {
      Check(s.code() == cqlstream::Status::Code::kCorruption && !s.message().empty());
    }
    Check(order.rows() == accepted);
  }
  return 0;
}
