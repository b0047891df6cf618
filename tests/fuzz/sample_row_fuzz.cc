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
// Reset then takes it back to its constructed state: fed the same answer
// again, it ends as a fresh decoder fed that answer does (status, rows,
// bytes, hash, answered_another_key), as a read sent again needs.
//
// Input (FuzzedDataProvider): hints, the key asked for, then rows until the
// input runs out.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <cstring>
#include <optional>
#include <vector>

#include <xxhash.h>

#include "cql/wire.h"
#include "store/sample_row.h"
#include "fuzz_check.h"

namespace cqlstream::store {
namespace {

// The largest region the harness reserves (the loader's memory budget plays
// this role: a larger sample is refused before anything is reserved).
constexpr int64_t kMaxRegion = 1 << 20;

using cqlstream::fuzz::Check;

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

using cqlstream::fuzz::View;

// Hints of any value, some near the harness's bounds.
SampleHints ConsumeHints(FuzzedDataProvider& in) {
  SampleHints h;
  h.max_size = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(-1, 3 * kMaxRegion / 2)
                                 : in.ConsumeIntegral<int64_t>();
  h.chunk_size = in.ConsumeBool() ? in.ConsumeIntegralInRange<int32_t>(-1, 4096) : in.ConsumeIntegral<int32_t>();
  h.label_kind = static_cast<LabelKind>(in.ConsumeIntegralInRange<int>(0, 3));
  h.classes = in.ConsumeIntegralInRange<int64_t>(-1, 40);
  return h;
}

// The buffered decoder allocates the size its hints allow: bounded here as
// the export bounds it.
SampleHints DecoderHints(SampleHints h) {
  if (h.max_size < 0 || h.max_size > kMaxRegion) h.max_size = kMaxRegion;
  return h;
}

// One fuzzed answer as the loader (cells, placer, region) and the buffered
// decoder (dec) see it.
struct Harness {
  Harness(SampleKey k, const SampleHints& hints, int64_t honest)
      : key(k), h(hints), dh(DecoderHints(hints)), honest_size(honest), dec(k, dh, /*keep_bytes=*/true) {}

  SampleKey key;
  SampleHints h;
  SampleHints dh;  // the decoder's
  int64_t honest_size;
  bool claimed = false, failed = false, continuation = false;
  SampleStatics statics;
  std::vector<uint8_t> region;  // exactly the claimed size: ASan sees any overrun
  std::vector<uint8_t> sent;    // the chunk bytes accepted, in order
  ChunkPlacer placer;
  SampleRowDecoder dec;
  // What dec was fed, to feed again: a page's start (col -1) or a cell.
  struct Event {
    int32_t row, col;
    std::optional<std::vector<uint8_t>> cell;
  };
  std::vector<Event> fed;
  void DecBeginPage() {
    fed.push_back({0, -1, std::nullopt});
    dec.BeginPage();
  }
  void DecCell(int32_t row, int32_t col, const std::optional<std::vector<uint8_t>>& cell) {
    fed.push_back({row, col, cell});
    dec.OnCell(row, col, View(cell));
  }
};

// Feeds `d` what the harness's decoder was fed.
void Replay(const Harness& s, SampleRowDecoder& d) {
  for (const auto& e : s.fed) {
    if (e.col < 0) {
      d.BeginPage();
    } else {
      d.OnCell(e.row, e.col, View(e.cell));
    }
  }
}

// The key, static and data cells of one row, fed to both decoders.
void FeedCells(FuzzedDataProvider& in, Harness& s, SampleRowCells& cells, int row) {
  const SampleKey row_key = in.ConsumeIntegralInRange<int>(0, 7) == 0 ? s.key + 1 : s.key;
  auto seg = Cell(in, 4, static_cast<uint32_t>(KeySegment(row_key)));
  auto idx = Cell(in, 4, static_cast<uint32_t>(KeyIndex(row_key)));
  auto sz = Cell(in, 8, static_cast<uint64_t>(s.honest_size));
  auto img = Cell(in, 8, static_cast<uint64_t>(s.honest_size));
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
    s.DecCell(row, col, *by_col[col]);
  }
  s.DecCell(row, kColData, data_cell);
}

// The first data cell claims the sample as the loader does: false when the
// answer is dropped (s.failed), else the region is reserved.
bool Claim(Harness& s, const SampleRowCells& cells) {
  if (s.continuation) return false;
  s.statics = cells.statics();
  Status st = CheckStatics(s.key, s.statics, s.h);
  if (!st.ok()) {
    Check(st.code() == Status::Code::kCorruption && !st.message().empty());
    return false;
  }
  // What CheckStatics accepted agrees with the hints.
  Check(s.statics.present && s.statics.size >= 0);
  Check(s.h.max_size < 0 || s.statics.size <= s.h.max_size);
  Check(s.statics.image_size >= -1 && s.statics.image_size <= s.statics.size);
  if (s.statics.size > kMaxRegion) return false;  // the memory budget refuses it
  s.region.assign(static_cast<size_t>(s.statics.size), 0);
  s.placer.Begin(s.statics.size, s.h.chunk_size);
  s.claimed = true;
  return true;
}

// The data cell of a row: a chunk of some length (a declared length may be
// anything; the bytes that follow are what the input has), placed where
// ChunkPlacer says. Sets s.failed when the loader drops the answer.
void PlaceChunk(FuzzedDataProvider& in, Harness& s, const SampleRowCells& cells) {
  const int64_t declared = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(0, 2 * 4096)
                                            : in.ConsumeIntegral<int32_t>();
  // A null (negative length) or empty cell gets no destination from the
  // frame decoder; the loader's sink places it as a chunk of no bytes.
  const int64_t len = std::max<int64_t>(declared, 0);
  if (cells.key_mismatch() || !cells.status().ok() || (!s.claimed && !Claim(s, cells))) {
    s.failed = true;
    return;
  }
  auto at = s.placer.Place(s.key, len);
  if (!at.ok()) {
    Check(at.status().code() == Status::Code::kCorruption);
    s.failed = true;
    return;
  }
  Check(*at <= s.region.size() && static_cast<uint64_t>(len) <= s.region.size() - *at);
  Check(s.h.chunk_size <= 0 || len <= s.h.chunk_size);
  std::vector<uint8_t> chunk = in.ConsumeBytes<uint8_t>(static_cast<size_t>(len));
  chunk.resize(static_cast<size_t>(len), 0xab);
  if (!chunk.empty()) std::memcpy(s.region.data() + *at, chunk.data(), chunk.size());
  s.sent.insert(s.sent.end(), chunk.begin(), chunk.end());
}

// After the last page: a sample the loader finished holds exactly its size
// and the chunks' bytes in order; an answer the buffered decoder accepted
// holds its declared size, hashed as placed.
void CheckResults(Harness& s) {
  if (s.claimed && !s.failed && s.placer.Finish(s.key).ok()) {
    Check(s.placer.written() == static_cast<uint64_t>(s.statics.size));
    Check(s.sent.size() == s.region.size() &&
          (s.sent.empty() || std::memcmp(s.sent.data(), s.region.data(), s.sent.size()) == 0));
  }
  Status decoded = s.dec.Finish();
  if (!decoded.ok()) Check(decoded.code() == Status::Code::kCorruption && !decoded.message().empty());
  if (decoded.ok() && s.dec.rows() > 0) {
    const SampleStatics& st = s.dec.statics();
    Check(st.present && st.size >= 0 && st.size <= s.dh.max_size);
    Check(st.image_size >= -1 && st.image_size <= st.size);
    Check(s.dec.bytes().size() == static_cast<size_t>(st.size));
    Check(s.dec.data_bytes() == st.size);
    Check(XXH64(s.dec.bytes().data(), s.dec.bytes().size(), 0) == s.dec.xxh64());
  }
  // Another sample's row as the first problem: a Corruption that says so.
  if (s.dec.answered_another_key()) {
    Check(!decoded.ok() && decoded.message().find("another sample's key") != std::string::npos);
  }
  // Reset, fed again: as a fresh decoder.
  SampleRowDecoder fresh(s.key, s.dh, /*keep_bytes=*/true);
  Replay(s, fresh);
  const Status fresh_st = fresh.Finish();
  s.dec.Reset();
  Replay(s, s.dec);
  const Status again = s.dec.Finish();
  Check(again.code() == fresh_st.code() && again.message() == fresh_st.message());
  Check(s.dec.rows() == fresh.rows() && s.dec.data_bytes() == fresh.data_bytes() && s.dec.xxh64() == fresh.xxh64());
  Check(s.dec.answered_another_key() == fresh.answered_another_key());
  Check(s.dec.bytes().size() == fresh.bytes().size() &&
        std::equal(s.dec.bytes().begin(), s.dec.bytes().end(), fresh.bytes().begin()));
  // And as the first decode ended.
  Check(again.code() == decoded.code() && again.message() == decoded.message());
}

}  // namespace
}  // namespace cqlstream::store

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cqlstream;
  using namespace cqlstream::store;
  FuzzedDataProvider in(data, size);
  const SampleHints h = ConsumeHints(in);
  const SampleKey key = MakeKey(in.ConsumeIntegralInRange<int32_t>(0, 3), in.ConsumeIntegralInRange<int32_t>(0, 3));
  Harness s(key, h, in.ConsumeIntegralInRange<int64_t>(0, 3 * 4096));
  while (in.remaining_bytes() > 0 && !s.failed) {
    // One page of rows.
    SampleRowCells cells(key, s.continuation);
    s.DecBeginPage();
    const int rows = in.ConsumeIntegralInRange<int>(0, 6);
    for (int row = 0; row < rows && !s.failed; ++row) {
      FeedCells(in, s, cells, row);
      PlaceChunk(in, s, cells);
    }
    s.continuation = true;
    if (in.ConsumeIntegralInRange<int>(0, 3) != 0) break;  // no more pages
  }
  CheckResults(s);
  return 0;
}
