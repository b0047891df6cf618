// Copyright (c) cqlstream authors.
//
// Test-only: a cell sink that records what it is given, as a member's sink
// of a demultiplexing sink (loader/coalesce.h's CoalescedSink,
// loader/foreign_group_sink.h's ForeignGroupSink): the row counts of its
// OnRowsBegin calls, every destination asked for, every cell; the cells of
// column `placed` get a destination (`buf`, sized to the cell), others none.
//
// Thread-safety: none (one test thread). Ownership: a value type, shared
// with the sink under test through std::shared_ptr.
#ifndef CQLSTREAM_LOADER_RECORDING_SINK_TEST_UTIL_H_
#define CQLSTREAM_LOADER_RECORDING_SINK_TEST_UTIL_H_

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "cql/frame_decoder.h"
#include "cqlstream/status.h"

namespace cqlstream::loader::testing {

class RecordingSink final : public cql::CellSink {
 public:
  explicit RecordingSink(int32_t placed) : placed_(placed) {}

  Status OnRowsBegin(const cql::RowsMetadata&, int32_t rows) override {
    begins.push_back(rows);
    return Status::OK();
  }
  std::span<uint8_t> CellDestination(int32_t row, int32_t col, int32_t size) override {
    dest.push_back({row, col});
    buf.assign(static_cast<size_t>(size), 0);
    return col == placed_ ? std::span<uint8_t>(buf) : std::span<uint8_t>();
  }
  Status OnCell(int32_t row, int32_t col, std::optional<cql::ByteView> data) override {
    cells.push_back({row, col, data ? std::vector<uint8_t>(data->begin(), data->end()) : std::vector<uint8_t>{}});
    return Status::OK();
  }
  void OnCellAbandoned(int32_t row, int32_t col) override { abandoned.push_back({row, col}); }
  // The rows of the destinations asked for, in order.
  std::vector<int32_t> dest_rows() const {
    std::vector<int32_t> r;
    for (const auto& d : dest) r.push_back(d.first);
    return r;
  }

  struct Cell {
    int32_t row, col;
    std::vector<uint8_t> bytes;
  };
  std::vector<int32_t> begins;
  std::vector<std::pair<int32_t, int32_t>> dest;  // (row, col)
  std::vector<Cell> cells;
  std::vector<uint8_t> buf;
  std::vector<std::pair<int32_t, int32_t>> abandoned;  // (row, col) given back unfinished

 private:
  int32_t placed_;
};

}  // namespace cqlstream::loader::testing

#endif  // CQLSTREAM_LOADER_RECORDING_SINK_TEST_UTIL_H_
