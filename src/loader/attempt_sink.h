// Copyright (c) cqlstream authors.
//
// AttemptSink: the cell sink of one execution (attempt, or one page of it)
// of a sample read of the loader engine (loader_impl.h). It hands the key
// and static cells to store::SampleRowCells and places data cells through
// Loader::Impl::Destination (the attempt that claims the data first owns
// the sample's slot). A coalesced read (loader/coalesce.h) gives each of its
// samples one AttemptSink and passes it that sample's rows.
//
// Ownership: shared by the execution that streams into it and the
// completion callback; it holds its Task. Thread-safety: the cell calls come
// from the one I/O thread decoding the answer; `offered` and `err` are
// written under the loader lock (Impl::mu); `hold` is atomic
// (loader/destination_hold.h).
#ifndef CQLSTREAM_LOADER_ATTEMPT_SINK_H_
#define CQLSTREAM_LOADER_ATTEMPT_SINK_H_

#include <memory>
#include <optional>
#include <span>

#include "loader/destination_hold.h"
#include "loader/loader_impl.h"

namespace cqlstream {

namespace loader_impl {

class AttemptSink final : public cql::CellSink {
 public:
  AttemptSink(Loader::Impl* l, std::shared_ptr<Task> t, int attempt, bool continuation)
      : l_(l), task(std::move(t)), attempt(attempt), continuation(continuation), cells(task->key, continuation) {}

  Status OnRowsBegin(const cql::RowsMetadata&, int32_t rows) override {
    this->rows = rows;
    return Status::OK();
  }
  std::span<uint8_t> CellDestination(int32_t, int32_t col, int32_t size) override {
    if (col != store::kColData) return {};
    return l_->Destination(*this, size);
  }
  Status OnCell(int32_t row, int32_t col, std::optional<cql::ByteView> data) override {
    hold.Release();  // the decoder is done with this cell, directed or not
    if (col == store::kColData) {
      // A null or empty data cell (the decoder asks no destination for
      // it) is a chunk of no bytes, placed as such: one may end a sample, a
      // second is out of place (ChunkPlacer), so rows without data cannot
      // page on without end. Other cells here were declined (dropped).
      if (!data || data->empty()) (void)l_->Destination(*this, 0);
      return Status::OK();
    }
    cells.OnCell(row, col, data);
    return Status::OK();
  }
  void OnCellAbandoned(int32_t, int32_t) override { hold.Release(); }

 private:
  Loader::Impl* l_;

 public:
  const std::shared_ptr<Task> task;
  const int attempt;
  const bool continuation;
  int empty_pages_before = 0;  // pages of this attempt without rows just before this one
  store::SampleRowCells cells;
  int32_t rows = 0;
  bool offered = false;  // some data cell asked for a destination (loader lock)
  Status err;            // set under the loader lock
  loader::DestinationHold hold;  // the decoder may be writing into the slot
};

}  // namespace loader_impl

}  // namespace cqlstream

#endif  // CQLSTREAM_LOADER_ATTEMPT_SINK_H_
