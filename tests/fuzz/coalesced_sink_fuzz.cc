// Copyright (c) cqlstream authors.
//
// libFuzzer target for the demultiplexer of a coalesced answer
// (loader/coalesce.h, CoalescedSink): an arbitrary group of keys and an
// arbitrary answer (rows of cells, key cells null or of any width, keys
// asked for or not, any number of rows per key), fed the way the frame
// decoder feeds a sink (CellDestination, then OnCell with the destination's
// bytes or a decoder view).
//
// Checked: every cell a member receives belongs to a row whose key cells
// (as the member sees them) are the member's own key; a member's rows are
// numbered 0, 1, ... in order; once the answer failed (a key not asked for,
// a malformed key cell) no member receives anything more and no destination
// is handed out; the per-member row counts add up to what the members saw;
// and nothing throws or traps (ASan, UBSan).
//
// Input (FuzzedDataProvider): the group's keys, then rows until the input
// runs out.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "loader/coalesce.h"
#include "store/sample_row.h"
#include "fuzz_check.h"

namespace cqlstream::loader {
namespace {

using cqlstream::fuzz::Check;

// A member: checks what it is given against its own key.
class MemberSink final : public cql::CellSink {
 public:
  explicit MemberSink(SampleKey key) : key_(key) {}
  Status OnRowsBegin(const cql::RowsMetadata&, int32_t) override { return Status::OK(); }
  std::span<uint8_t> CellDestination(int32_t row, int32_t col, int32_t size) override {
    Check(row == rows_ - 1 && col > store::kColIdx && size >= 0);
    buf_.assign(static_cast<size_t>(size), 0);
    return buf_;
  }
  Status OnCell(int32_t row, int32_t col, std::optional<cql::ByteView> data) override {
    if (col == store::kColSeg) {
      Check(row == rows_);  // a new row, numbered in order
      rows_++;
      Check(data && DecodeIntCell(*data) == KeySegment(key_));
    } else if (col == store::kColIdx) {
      Check(row == rows_ - 1 && data && DecodeIntCell(*data) == KeyIndex(key_));
    } else {
      Check(row == rows_ - 1);
    }
    cells++;
    return Status::OK();
  }
  int32_t rows() const { return rows_; }
  int64_t cells = 0;

 private:
  SampleKey key_;
  int32_t rows_ = 0;
  std::vector<uint8_t> buf_;
};

std::vector<uint8_t> IntBytes(int32_t v) {
  return {static_cast<uint8_t>(v >> 24), static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 8),
          static_cast<uint8_t>(v)};
}

// A key cell: usually the 4 bytes of an int near the group's, sometimes
// null or of another width.
std::optional<std::vector<uint8_t>> KeyCell(FuzzedDataProvider& in, int32_t near) {
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0:
      return std::nullopt;
    case 1:
      return in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 8));
    default:
      return IntBytes(near + in.ConsumeIntegralInRange<int32_t>(0, 3));
  }
}

}  // namespace
}  // namespace cqlstream::loader

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cqlstream;
  using namespace cqlstream::loader;
  FuzzedDataProvider in(data, size);
  const int32_t seg = in.ConsumeIntegralInRange<int32_t>(0, 2);
  const int n = in.ConsumeIntegralInRange<int>(1, 6);
  std::vector<CoalescedSink::Member> members;
  std::vector<std::shared_ptr<MemberSink>> sinks;
  std::vector<SampleKey> seen;
  for (int i = 0; i < n; ++i) {
    const SampleKey k = MakeKey(seg, in.ConsumeIntegralInRange<int32_t>(0, 5));
    bool dup = false;
    for (SampleKey s : seen) dup |= s == k;
    if (dup) continue;  // the loader never groups a key twice
    seen.push_back(k);
    sinks.push_back(std::make_shared<MemberSink>(k));
    members.push_back({k, sinks.back()});
  }
  CoalescedSink sink(members);
  Check(sink.OnRowsBegin(cql::RowsMetadata{}, in.ConsumeIntegral<int32_t>()).ok());
  int64_t cells_after_error = -1;
  for (int32_t row = 0; in.remaining_bytes() > 0 && row < 64; ++row) {
    const int ncols = in.ConsumeIntegralInRange<int>(0, store::kColData + 1);
    for (int col = 0; col < ncols; ++col) {
      std::optional<std::vector<uint8_t>> cell;
      if (col <= store::kColIdx) {
        cell = KeyCell(in, col == store::kColSeg ? seg : 0);
      } else if (in.ConsumeBool()) {
        cell = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 16));
      }
      std::span<uint8_t> dst;
      if (cell && !cell->empty()) dst = sink.CellDestination(row, col, static_cast<int32_t>(cell->size()));
      if (!sink.error().ok()) Check(dst.empty());
      Status st;
      if (!cell) {
        st = sink.OnCell(row, col, std::nullopt);
      } else if (!dst.empty()) {
        Check(dst.size() == cell->size());
        std::copy(cell->begin(), cell->end(), dst.begin());
        st = sink.OnCell(row, col, cql::ByteView(dst));
      } else {
        st = sink.OnCell(row, col, cql::ByteView(*cell));
      }
      Check(st.ok());
      int64_t total = 0;
      for (const auto& s : sinks) total += s->cells;
      if (!sink.error().ok()) {
        if (cells_after_error < 0) cells_after_error = total;
        Check(total == cells_after_error);  // nothing more after the error
      }
    }
  }
  for (size_t i = 0; i < sinks.size(); ++i) Check(sink.rows_of(i) == sinks[i]->rows());
  return 0;
}
