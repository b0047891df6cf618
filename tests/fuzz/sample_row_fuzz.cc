// Copyright (c) cqlstream authors.
//
// libFuzzer target for the loader's handling of a data row against the
// catalog (store/sample_row.h): arbitrary catalog hints (max_size,
// chunk_size, label kind, classes) and an arbitrary answer (rows of key and
// static cells, null or of any width, and data chunks of any length, over
// one or more pages), driven the way the loader drives them: the first data
// cell claims the sample (CheckStatics), a region of exactly `size` bytes is
// reserved, every chunk is placed where ChunkPlacer says, and the sample is
// complete when Finish() agrees.
//
// Checked: no write outside the region (ASan: the region is its own heap
// block), every accepted statics agrees with the hints, a finished sample
// holds exactly its size and the bytes sent in order, and nothing throws
// or traps (UBSan) whatever the row says.
//
// The same rows also go through the buffered decoder of verify and export
// (SampleRowDecoder, keeping the bytes), each row with a data cell of its
// own: whatever it is fed, it never crashes, and when it accepts an answer
// it holds exactly the declared size (within its hints), hashed as placed.
//
// Input (FuzzedDataProvider): hints, the key asked for, then rows until the
// input runs out.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include <xxhash.h>

#include "cql/wire.h"
#include "store/sample_row.h"

namespace cqlstream::store {
namespace {

// The largest region the harness reserves (the loader's memory budget plays
// this role: a larger sample is refused before anything is reserved).
constexpr int64_t kMaxRegion = 1 << 20;

void Check(bool ok) {
  if (!ok) std::abort();
}

std::vector<uint8_t> Be(uint64_t v, size_t width) {
  std::vector<uint8_t> b(width);
  for (size_t i = 0; i < width; ++i) b[i] = static_cast<uint8_t>(v >> (8 * (width - 1 - i)));
  return b;
}

// A cell: null, well-formed (the right width, a chosen value) or any bytes.
std::optional<std::vector<uint8_t>> Cell(FuzzedDataProvider& in, size_t width, uint64_t good) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return std::nullopt;
    case 1:
      return in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 16));
    case 2:
      return Be(in.ConsumeIntegral<uint64_t>(), width);
    default:
      return Be(good, width);
  }
}

std::optional<std::span<const uint8_t>> View(const std::optional<std::vector<uint8_t>>& c) {
  if (!c) return std::nullopt;
  return std::span<const uint8_t>(*c);
}

}  // namespace
}  // namespace cqlstream::store

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cqlstream;
  using namespace cqlstream::store;
  FuzzedDataProvider in(data, size);
  SampleHints h;
  h.max_size = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(-1, 3 * kMaxRegion / 2)
                                 : in.ConsumeIntegral<int64_t>();
  h.chunk_size = in.ConsumeBool() ? in.ConsumeIntegralInRange<int32_t>(-1, 4096) : in.ConsumeIntegral<int32_t>();
  h.label_kind = static_cast<LabelKind>(in.ConsumeIntegralInRange<int>(0, 3));
  h.classes = in.ConsumeIntegralInRange<int64_t>(-1, 40);
  const SampleKey key = MakeKey(in.ConsumeIntegralInRange<int32_t>(0, 3), in.ConsumeIntegralInRange<int32_t>(0, 3));
  const int64_t honest_size = in.ConsumeIntegralInRange<int64_t>(0, 3 * 4096);

  bool claimed = false, failed = false;
  SampleStatics statics;
  std::vector<uint8_t> region;  // exactly the claimed size: ASan sees any overrun
  std::vector<uint8_t> sent;    // the chunk bytes accepted, in order
  ChunkPlacer placer;
  bool continuation = false;
  // The buffered decoder allocates the size its hints allow: bounded here as
  // the export bounds it.
  SampleHints dh = h;
  if (dh.max_size < 0 || dh.max_size > kMaxRegion) dh.max_size = kMaxRegion;
  SampleRowDecoder dec(key, dh, /*keep_bytes=*/true);
  while (in.remaining_bytes() > 0 && !failed) {
    // One page of rows.
    SampleRowCells cells(key, continuation);
    dec.BeginPage();
    const int rows = in.ConsumeIntegralInRange<int>(0, 6);
    for (int row = 0; row < rows && !failed; ++row) {
      const SampleKey row_key = in.ConsumeIntegralInRange<int>(0, 7) == 0 ? key + 1 : key;
      auto seg = Cell(in, 4, static_cast<uint32_t>(KeySegment(row_key)));
      auto idx = Cell(in, 4, static_cast<uint32_t>(KeyIndex(row_key)));
      auto sz = Cell(in, 8, static_cast<uint64_t>(honest_size));
      auto img = Cell(in, 8, static_cast<uint64_t>(honest_size));
      auto ck = Cell(in, 8, 0);
      auto lb = Cell(in, 4, in.ConsumeIntegralInRange<uint32_t>(0, 12));
      std::optional<std::vector<uint8_t>> labels;
      if (in.ConsumeBool()) labels = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 40));
      std::optional<std::vector<uint8_t>> data_cell;
      if (in.ConsumeIntegralInRange<int>(0, 5) != 0) {
        data_cell = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 2 * 4096));
      }
      // Key and static cells, in column order (kColSeg .. kColLabels).
      const std::optional<std::vector<uint8_t>>* by_col[] = {&seg, &idx, &sz, &img, &ck, &lb, &labels};
      for (int32_t col = kColSeg; col <= kColLabels; ++col) {
        cells.OnCell(row, col, View(*by_col[col]));
        dec.OnCell(row, col, View(*by_col[col]));
      }
      dec.OnCell(row, kColData, View(data_cell));
      // The data cell: a chunk of some length (a declared length may be
      // anything; the bytes that follow are what the input has).
      const int64_t len = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(0, 2 * 4096)
                                           : in.ConsumeIntegral<int32_t>();
      if (len <= 0) continue;  // the decoder asks no destination for these
      if (cells.key_mismatch() || !cells.status().ok()) {
        failed = true;  // the loader drops the answer
        break;
      }
      if (!claimed) {
        if (continuation) {
          failed = true;
          break;
        }
        statics = cells.statics();
        Status st = CheckStatics(key, statics, h);
        if (!st.ok()) {
          Check(st.code() == Status::Code::kCorruption && !st.message().empty());
          failed = true;
          break;
        }
        // What CheckStatics accepted agrees with the hints.
        Check(statics.present && statics.size >= 0);
        Check(h.max_size < 0 || statics.size <= h.max_size);
        Check(statics.image_size >= -1 && statics.image_size <= statics.size);
        if (statics.size > kMaxRegion) {
          failed = true;  // the memory budget refuses it
          break;
        }
        region.assign(static_cast<size_t>(statics.size), 0);
        placer.Begin(statics.size, h.chunk_size);
        claimed = true;
      }
      auto at = placer.Place(key, len);
      if (!at.ok()) {
        Check(at.status().code() == Status::Code::kCorruption);
        failed = true;
        break;
      }
      Check(*at <= region.size() && static_cast<uint64_t>(len) <= region.size() - *at);
      Check(h.chunk_size <= 0 || len <= h.chunk_size);
      std::vector<uint8_t> chunk = in.ConsumeBytes<uint8_t>(static_cast<size_t>(len));
      chunk.resize(static_cast<size_t>(len), 0xab);
      std::memcpy(region.data() + *at, chunk.data(), chunk.size());
      sent.insert(sent.end(), chunk.begin(), chunk.end());
    }
    continuation = true;
    if (in.ConsumeIntegralInRange<int>(0, 3) != 0) break;  // no more pages
  }
  if (claimed && !failed && placer.Finish(key).ok()) {
    // A complete sample: exactly its size, the chunks' bytes in order.
    Check(placer.written() == static_cast<uint64_t>(statics.size));
    Check(sent.size() == region.size() && std::memcmp(sent.data(), region.data(), sent.size()) == 0);
  }
  Status decoded = dec.Finish();
  if (!decoded.ok()) Check(decoded.code() == Status::Code::kCorruption && !decoded.message().empty());
  if (decoded.ok() && dec.rows() > 0) {
    const SampleStatics& st = dec.statics();
    Check(st.present && st.size >= 0 && st.size <= dh.max_size);
    Check(st.image_size >= -1 && st.image_size <= st.size);
    Check(dec.bytes().size() == static_cast<size_t>(st.size));
    Check(dec.data_bytes() == st.size);
    Check(XXH64(dec.bytes().data(), dec.bytes().size(), 0) == dec.xxh64());
  }
  return 0;
}
