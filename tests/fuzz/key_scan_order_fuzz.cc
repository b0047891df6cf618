// Copyright (c) cqlstream authors.
//
// libFuzzer target for the key scan's row checks (store/key_scan_order.h):
// a token range of any bounds, then rows of a token cell and a key cell,
// each null or of any bytes, fed one by one as pages deliver them.
//
// Checked: nothing throws or traps (ASan/UBSan); a row is accepted exactly
// when its token cell is 8 bytes, its key cell is not null, its token lies
// in (start, end], and (token, key bytes) is strictly after the last
// accepted row's (tracked here independently: both a refusal of such a row
// and an acceptance of another abort); a refusal is a Corruption with a
// message and leaves the count unchanged; rows() counts the accepted rows.
//
// Input (FuzzedDataProvider): start, end, then rows until the input ends.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "cql/wire.h"
#include "store/key_scan_order.h"
#include "fuzz_check.h"

namespace {

using cqlstream::fuzz::Check;

// Null one time in 8.
std::optional<std::vector<uint8_t>> Cell(FuzzedDataProvider& in, size_t max) {
  return cqlstream::fuzz::NullableBytes(in, max, 8);
}

using cqlstream::fuzz::View;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const auto start = in.ConsumeIntegral<int64_t>();
  const auto end = in.ConsumeIntegral<int64_t>();
  cqlstream::store::KeyScanOrder order(start, end, "ks.t");
  int64_t accepted = 0;
  std::optional<std::pair<int64_t, std::vector<uint8_t>>> last;
  while (in.remaining_bytes() > 0) {
    // Tokens near the last one are the interesting ones: small deltas.
    std::optional<std::vector<uint8_t>> token;
    if (last && in.ConsumeBool()) {
      token = std::vector<uint8_t>(8);
      const auto t = static_cast<uint64_t>(last->first) + static_cast<uint64_t>(in.ConsumeIntegralInRange<int>(-2, 2));
      cqlstream::cql::StoreU64(token->data(), t);
    } else {
      token = Cell(in, 10);
    }
    const auto key = Cell(in, 16);
    // The spec, independently of the code under test.
    bool expected = token && token->size() == 8 && key.has_value();
    int64_t t = 0;
    if (expected) {
      t = static_cast<int64_t>(cqlstream::cql::LoadU64(token->data()));
      expected = t > start && t <= end;
    }
    if (expected && last) {
      expected = t > last->first || (t == last->first && std::lexicographical_compare(last->second.begin(),
                                                                                     last->second.end(), key->begin(),
                                                                                     key->end()));
    }
    const cqlstream::Status s = order.Row(View(token), View(key));
    Check(s.ok() == expected);
    if (s.ok()) {
      last = std::make_pair(t, *key);
      ++accepted;
    } else {
      Check(s.code() == cqlstream::Status::Code::kCorruption && !s.message().empty());
    }
    Check(order.rows() == accepted);
  }
  return 0;
}
