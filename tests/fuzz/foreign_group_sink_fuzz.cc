// Copyright (c) cqlstream authors.
//
// libFuzzer target for the demultiplexer of a coalesced foreign read of an
// attached dataset (loader/foreign_group_sink.h, ForeignGroupSink): an
// arbitrary group of foreign keys and an arbitrary answer (rows of cells;
// key cells null, asked for or not, of any length; rows that do not start
// with their key; any number of rows per key), fed the way the frame
// decoder feeds a sink (CellDestination, then OnCell with the destination's
// bytes or a decoder view).
//
// Checked: an answer of another column count than the group's fails before
// any cell; a data or label cell, and a destination, go to the member whose
// key opened their row and to no other (none for the key cell itself); a
// member's rows are numbered from 0 in order and its OnRowsBegin comes
// once, before its first cell (with a row count of 1); once the answer
// failed no member receives anything more and no destination is handed
// out; the per-member row counts are the answer's rows of each member's key
// before any failure; nothing throws or traps (ASan, UBSan).
//
// Input (FuzzedDataProvider): the group's keys, then rows until the input
// runs out.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "loader/foreign_group_sink.h"
#include "fuzz_check.h"

namespace cqlstream::loader {
namespace {

using cqlstream::fuzz::Check;

// A member: checks what it is given against the rows it was told of.
class MemberSink final : public cql::CellSink {
 public:
  Status OnRowsBegin(const cql::RowsMetadata&, int32_t rows) override {
    Check(begins_ == 0 && cells == 0 && rows == 1);
    begins_++;
    return Status::OK();
  }
  std::span<uint8_t> CellDestination(int32_t row, int32_t col, int32_t size) override {
    Check(begins_ == 1 && row >= 0 && col >= 0 && size >= 0);
    NoteRow(row);
    dests++;
    buf_.assign(static_cast<size_t>(size), 0);
    return buf_;
  }
  Status OnCell(int32_t row, int32_t col, std::optional<cql::ByteView>) override {
    Check(begins_ == 1 && col >= 0);
    NoteRow(row);
    cells++;
    return Status::OK();
  }
  int64_t cells = 0, dests = 0;

 private:
  // Rows come in order (a row of only its key cell gives the member no
  // cell, so a number may be skipped).
  void NoteRow(int32_t row) {
    Check(row >= max_row_ && row >= 0);
    max_row_ = row;
  }
  int begins_ = 0;
  int32_t max_row_ = -1;
  std::vector<uint8_t> buf_;
};

}  // namespace
}  // namespace cqlstream::loader

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cqlstream;
  using namespace cqlstream::loader;
  FuzzedDataProvider in(data, size);
  const int n = in.ConsumeIntegralInRange<int>(1, 6);
  std::vector<std::string> keys;
  std::vector<ForeignGroupSink::Member> members;
  std::vector<std::shared_ptr<MemberSink>> sinks;
  for (int i = 0; i < n; ++i) {
    std::string k = in.ConsumeBytesAsString(in.ConsumeIntegralInRange<size_t>(0, 4));
    bool dup = false;
    for (const auto& s : keys) dup |= s == k;
    if (dup) continue;  // the loader never groups a key twice
    keys.push_back(k);
    sinks.push_back(std::make_shared<MemberSink>());
    members.push_back({k, sinks.back()});
  }
  const int32_t columns = in.ConsumeIntegralInRange<int32_t>(2, 3);
  ForeignGroupSink sink(members, columns);
  cql::RowsMetadata metadata;
  metadata.column_count = in.ConsumeIntegralInRange<int>(0, 3) == 0 ? in.ConsumeIntegralInRange<int32_t>(0, 4) : columns;
  Check(sink.OnRowsBegin(metadata, in.ConsumeIntegral<int32_t>()).ok());
  // An answer of other columns fails before any cell (checked below: no
  // member cell after an error).
  Check(sink.error().ok() == (metadata.column_count == columns));
  int64_t cells_after_error = -1;
  std::vector<int32_t> expected_rows(sinks.size(), 0);
  for (int32_t row = 0; in.remaining_bytes() > 0 && row < 64; ++row) {
    const int ncols = in.ConsumeIntegralInRange<int>(0, 4);
    const int first = in.ConsumeIntegralInRange<int>(0, 9) == 0 ? 1 : 0;  // now and then no key cell first
    int owner = -1;  // the member whose key opened this row
    for (int col = first; col < first + ncols; ++col) {
      std::vector<int64_t> before, dests_before;
      for (const auto& s : sinks) {
        before.push_back(s->cells);
        dests_before.push_back(s->dests);
      }
      const bool ok_before = sink.error().ok();
      std::optional<std::string> cell;
      if (col == 0) {
        const int pick = in.ConsumeIntegralInRange<int>(0, 9);
        if (pick == 0) {
          cell = std::nullopt;
        } else if (pick == 1 || keys.empty()) {
          cell = in.ConsumeBytesAsString(in.ConsumeIntegralInRange<size_t>(0, 4));
        } else {
          cell = keys[in.ConsumeIntegralInRange<size_t>(0, keys.size() - 1)];
        }
      } else if (in.ConsumeBool()) {
        cell = in.ConsumeBytesAsString(in.ConsumeIntegralInRange<size_t>(0, 16));
      }
      // As the decoder: a destination is asked for every non-empty cell,
      // the key's too (it gets none: the key is read whole).
      std::span<uint8_t> dst;
      if (cell && !cell->empty()) dst = sink.CellDestination(row, col, static_cast<int32_t>(cell->size()));
      if (!sink.error().ok() || col == 0) Check(dst.empty());
      Status st;
      if (!cell) {
        st = sink.OnCell(row, col, std::nullopt);
      } else if (!dst.empty()) {
        Check(dst.size() == cell->size());
        std::copy(cell->begin(), cell->end(), dst.begin());
        st = sink.OnCell(row, col, cql::ByteView(dst));
      } else {
        st = sink.OnCell(row, col,
                         cql::ByteView(reinterpret_cast<const uint8_t*>(cell->data()), cell->size()));
      }
      Check(st.ok());
      if (col == 0 && cell) {
        for (size_t i = 0; i < keys.size(); ++i) {
          if (keys[i] == *cell) {
            owner = static_cast<int>(i);
            if (ok_before) expected_rows[i]++;  // the answer held a row of member i
          }
        }
      }
      // A data or label cell, and its destination (a write into a sample's
      // memory), goes to the row's owner and to no one else.
      for (size_t i = 0; i < sinks.size(); ++i) {
        if (sinks[i]->cells != before[i] || sinks[i]->dests != dests_before[i]) {
          Check(col > 0 && static_cast<int>(i) == owner && sink.error().ok());
        }
      }
      int64_t total = 0;
      for (const auto& s : sinks) total += s->cells;
      if (!sink.error().ok()) {
        if (cells_after_error < 0) cells_after_error = total;
        Check(total == cells_after_error);  // nothing more after the error
      }
    }
  }
  for (size_t i = 0; i < sinks.size(); ++i) Check(sink.rows_of(i) == expected_rows[i]);
  return 0;
}
