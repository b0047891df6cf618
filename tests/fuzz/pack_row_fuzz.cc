// Copyright (c) cqlstream authors.
//
// libFuzzer target for a row of the packs table (store/pack.h) as the loader
// reads it: an answer of `SELECT seg, count, pack_size, seed, packed,
// left_out FROM packs` whose column types and cells are arbitrary (null,
// of any width, of another type than the table's), decoded by the Rows
// decoder and DecodePackRow, then checked by ValidatePack against an
// arbitrary segment and dataset (count, max_size, chunk size).
//
// Checked: nothing throws or traps (ASan, UBSan); a refusal has a message;
// a row ValidatePack accepts has a pack size in [kMinPackSize,
// kMaxPackSize] that the segment's max_size allows, the segment's count,
// and packed + left_out equal to the samples of its full packs; and its
// membership (PackMembership, what the loader builds from it) puts every
// probed member and leftover inside the segment.
//
// Input (FuzzedDataProvider): the segment and dataset, the six column
// types, the row count, then each cell's width and bytes.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cql/response.h"
#include "cql/wire.h"
#include "store/pack.h"
#include "fuzz_check.h"

namespace {

using cqlstream::fuzz::Check;

void PutShort(std::vector<uint8_t>* b, uint16_t v) {
  b->push_back(static_cast<uint8_t>(v >> 8));
  b->push_back(static_cast<uint8_t>(v));
}
void PutInt(std::vector<uint8_t>* b, int32_t v) {
  for (int s = 24; s >= 0; s -= 8) b->push_back(static_cast<uint8_t>(static_cast<uint32_t>(v) >> s));
}
void PutString(std::vector<uint8_t>* b, const std::string& s) {
  PutShort(b, static_cast<uint16_t>(s.size()));
  b->insert(b->end(), s.begin(), s.end());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cqlstream;
  FuzzedDataProvider in(data, size);
  SegmentInfo g;
  g.seg = in.ConsumeIntegral<int32_t>();
  g.count = in.ConsumeIntegralInRange<int64_t>(-1, int64_t{1} << 31);
  g.max_size = in.ConsumeIntegralInRange<int64_t>(-1, 1 << 21);
  DatasetInfo d;
  d.name = "fz";
  d.chunk_size = in.ConsumeIntegralInRange<int32_t>(-1, 1 << 21);
  const bool segment_known = in.ConsumeBool();

  // The RESULT Rows body: global table spec, six columns, then the cells.
  static const char* kNames[] = {"seg", "count", "pack_size", "seed", "packed", "left_out"};
  static const uint16_t kTypes[] = {0x0009 /*int*/, 0x0002 /*bigint*/, 0x000D /*varchar*/, 0x0003 /*blob*/};
  std::vector<uint8_t> body;
  PutInt(&body, 0x0001);  // flags: global tables spec
  PutInt(&body, 6);
  PutString(&body, "ks");
  PutString(&body, "packs");
  for (const char* name : kNames) {
    PutString(&body, name);
    PutShort(&body, kTypes[in.ConsumeIntegralInRange<size_t>(0, 3)]);
  }
  const int32_t rows = in.ConsumeIntegralInRange<int32_t>(0, 4);
  PutInt(&body, rows);
  for (int32_t i = 0; i < rows * 6; ++i) {
    const int32_t width = in.ConsumeIntegralInRange<int32_t>(-1, 9);
    PutInt(&body, width);
    for (int32_t k = 0; k < width; ++k) body.push_back(in.ConsumeIntegral<uint8_t>());
  }
  auto owned = std::make_shared<const cql::Bytes>(std::move(body));
  cql::Reader r(*owned);
  auto decoded = cql::Rows::Decode(owned, r);
  if (!decoded.ok()) return 0;
  for (int32_t i = 0; i < decoded->row_count(); ++i) {
    auto p = store::DecodePackRow(*decoded, i);
    if (!p.ok()) {
      Check(!p.status().message().empty());
      continue;
    }
    Status st = store::ValidatePack(*p, segment_known ? &g : nullptr, d);
    if (!st.ok()) {
      Check(!st.message().empty());
      continue;
    }
    Check(p->pack_size >= store::kMinPackSize && p->pack_size <= store::kMaxPackSize);
    Check(p->count == g.count);
    Check(store::PackSizeFor(g.max_size, d.chunk_size, p->pack_size) == p->pack_size);
    Check(p->packed >= 0 && p->left_out >= 0 && p->packed + p->left_out == p->count / p->pack_size * p->pack_size);
    store::PackMembership m(p->count, p->pack_size, p->seed, p->seg);
    Check(m.packs() * p->pack_size + m.leftovers() == p->count);
    if (m.packs() > 0) {
      for (int64_t j : {int64_t{0}, m.packs() - 1}) {
        for (int32_t k : {0, p->pack_size - 1}) {
          const int32_t idx = m.Member(j, k);
          Check(idx >= 0 && idx < p->count);
        }
      }
    }
    if (m.leftovers() > 0) {
      const int32_t idx = m.Leftover(m.leftovers() - 1);
      Check(idx >= 0 && idx < p->count);
    }
  }
  return 0;
}
