// Copyright (c) cqlstream authors.
//
// AttachedSink: the cell sink of one foreign read of an attached dataset's
// sample (loader_attached.cc; step 2 of an attempt, store/attached.h). Its
// cells go to a store::AttachedRow; the data cell (and a target) to the
// sample's slot through Loader::Impl::AttachedDestination. Every foreign
// read passes its cells through a loader::ForeignGroupSink, which checks
// each row's key and hands the sink its own rows' other cells: a coalesced
// read (loader_foreign_group.cc) one AttachedSink per sample, a single read
// (LaunchForeignRead) a group of one.
// Also the settings every read of an attached dataset is sent with.
//
// Ownership: shared by the execution that streams into it and the
// completion callback; it holds its Task. Thread-safety: the cell calls come
// from the one I/O thread decoding the answer; `offered` and `err` are
// written under the loader lock (Impl::mu); `row` is given its row count
// (the group's rows_of) and read by the completion once the answer has
// ended.
#ifndef CQLSTREAM_LOADER_ATTACHED_SINK_H_
#define CQLSTREAM_LOADER_ATTACHED_SINK_H_

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "loader/destination_hold.h"
#include "loader/loader_impl.h"

namespace cqlstream::loader_impl {

class AttachedSink final : public cql::CellSink {
 public:
  AttachedSink(Loader::Impl* l, std::shared_ptr<Task> t, int attempt, const AttachedReads::Split* split,
               std::string key)
      : task(std::move(t)),
        attempt(attempt),
        target(split->row.label_kind == LabelKind::kTarget && split->row.label_type == store::AttachedLabelType::kBlob),
        row(task->key, std::move(key), &split->row),
        l_(l) {}

  Status OnRowsBegin(const cql::RowsMetadata&, int32_t rows) override {
    row.OnRowsBegin(rows);
    return Status::OK();
  }
  std::span<uint8_t> CellDestination(int32_t r, int32_t col, int32_t size) override {
    // The data goes to the slot, except a target dataset's: its slot size
    // is known only at the target cell, so the data is buffered (kept).
    const bool placed = col == store::kAttachedColData ? !target : (col == store::kAttachedColLabel && target);
    if (r != 0 || !placed) return {};
    return l_->AttachedDestination(*this, col, size);
  }
  Status OnCell(int32_t r, int32_t col, std::optional<cql::ByteView> data) override {
    hold.Release();  // the decoder is done with this cell, directed or not
    row.OnCell(r, col, data);
    return Status::OK();
  }
  void OnCellAbandoned(int32_t, int32_t) override { hold.Release(); }

  const std::shared_ptr<Task> task;
  const int attempt;
  const bool target;
  store::AttachedRow row;
  bool offered = false;  // a cell asked for a destination (loader lock)
  Status err;            // set under the loader lock
  loader::DestinationHold hold;  // the decoder may be writing into the slot

 private:
  Loader::Impl* l_;
};

// A read of an attached dataset (its key lookups and foreign reads, single
// or grouped): idempotent, LOCAL_ONE, a page of two rows (one is expected;
// two show that there are more; grouped reads unpage it), the attempt's
// timeout, no retry of the session's own (the loader retries), and answers
// that must name the columns the read was prepared with: a lookup's
// (int seg, int idx, key) and a read's (int key, blob, int label) rows are
// otherwise the same shape (net/result_columns.h).
inline void ReadSettings(net::Statement& st, std::chrono::milliseconds timeout, int plan_offset,
                         const net::RetryPolicy* retry) {
  st.check_result_columns = true;
  st.idempotent = true;
  st.consistency = cql::Consistency::kLocalOne;
  st.page_size = 2;
  st.timeout = timeout;
  st.plan_offset = plan_offset;
  st.retry = retry;
}

// The foreign key for messages (a blob key could be long).
inline std::string KeyText(const Value& key) {
  std::string s = key.ToString();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

}  // namespace cqlstream::loader_impl

#endif  // CQLSTREAM_LOADER_ATTACHED_SINK_H_
