// Copyright (c) cqlstream authors.
//
// FrameDecoder: an incremental decoder of the response byte stream of one
// connection. It owns a receive buffer and tells its user where the next
// bytes from the wire should be written (ReadTarget), so that the bytes of a
// large blob cell can be received straight into their final destination —
// a batch buffer — without an intermediate copy.
//
// For a RESULT frame whose stream has a CellSink (SinkLookup returns one),
// a Rows result is decoded as it arrives: metadata first, then cell by cell.
// For each cell the sink may name a destination of exactly the cell's size;
// bytes already in the receive buffer are copied there, and while the rest of
// that cell is outstanding ReadTarget() returns the rest of the destination.
// Every other frame is buffered whole and returned in DecodedFrame::body.
//
// Malformed input (bad header, bad lengths, a body larger than the limit)
// yields a non-OK Status from Commit/Feed; after that the decoder must not be
// used again and the connection must be closed (Commit/Feed keep returning
// the same error). It never reads out of bounds, never hangs (any byte
// sequence is either decoded or rejected), and holds at most one frame body
// (<= max_body) plus a receive buffer of at most max(kHeaderSize, max_body) +
// read_chunk bytes; the buffer shrinks back after a large frame. Memory
// follows the bytes that arrive, not the lengths the peer declares: a
// buffered body holds at most 2 x (its bytes received) + read_chunk, so a
// header that claims max_body and then sends little costs little.
//
// A sink's own error (returned from one of its callbacks) affects only that
// frame: the decoder stops calling the sink, drains the rest of the frame,
// and reports the error in DecodedFrame::sink_status.
//
// Thread-safety: not thread-safe; one decoder per connection, used from the
// connection's I/O thread. Sink callbacks run on that thread, inside Commit.
// Ownership: the decoder holds a shared_ptr to the sink of the frame being
// decoded until that frame is complete, so the sink outlives its frame even
// if its request was abandoned meanwhile.
#ifndef CQLSTREAM_CQL_FRAME_DECODER_H_
#define CQLSTREAM_CQL_FRAME_DECODER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cql/frame.h"
#include "cql/response.h"
#include "cql/wire.h"
#include "cqlstream/status.h"

namespace cqlstream::cql {

// Receives the cells of a streamed Rows result.
class CellSink {
 public:
  virtual ~CellSink() = default;
  // The columns this sink expects of its answer, or nullptr: a Prepared
  // result's metadata (its specs_wire), which must stay valid while the
  // sink is in use. An answer whose column specs are byte for byte those is
  // not decoded into ColumnSpecs: OnRowsBegin sees specs_matched and no
  // columns (DecodeRowsMetadata). Called when a result's metadata is parsed,
  // possibly more than once per result while its bytes arrive.
  virtual const RowsMetadata* ExpectedColumns() const { return nullptr; }
  // Once per Rows result, before any cell.
  virtual Status OnRowsBegin(const RowsMetadata& metadata, int32_t row_count) = 0;
  // Where cell (row, col) of `size` >= 0 bytes should land: a span of exactly
  // `size` bytes that stays valid until OnCell for this cell returns, or an
  // empty span to let the decoder buffer the cell. Not called for null cells
  // or for size 0.
  virtual std::span<uint8_t> CellDestination(int32_t row, int32_t col, int32_t size) = 0;
  // A complete cell: the destination span for a directed cell, a view into
  // decoder memory (valid only during the call) otherwise, nullopt for null.
  virtual Status OnCell(int32_t row, int32_t col, std::optional<ByteView> data) = 0;
  // The destination of cell (row, col) is given up before the cell is
  // complete: its reader stopped reading (FrameDecoder::Abandon: a
  // connection closed, or its decoder failed or ended). No byte lands in
  // the span after this call, and no OnCell for the cell follows. Until
  // this call or that cell's OnCell, a read in flight may still write into
  // the span, whatever the sink's owner has decided meanwhile (a request
  // timed out while its answer arrived into the destination): the memory
  // must not be reused before one of the two.
  virtual void OnCellAbandoned(int32_t /*row*/, int32_t /*col*/) {}
};

struct DecodedFrame {
  FrameHeader header;
  Bytes body;                    // the whole body, unless streamed
  bool streamed = false;         // a Rows result delivered through a CellSink
  Status sink_status;            // streamed: the first error a sink callback returned
  RowsMetadata rows_metadata;    // streamed: the result metadata (paging state)
  int32_t row_count = 0;         // streamed
  std::vector<std::string> warnings;  // streamed: warnings from the frame preamble
};

class FrameDecoder {
 public:
  struct Options {
    uint32_t max_body = kMaxBodySize;  // larger frames are FrameTooLarge
    size_t read_chunk = 64 << 10;      // free buffer space offered per read (at most; see ReadTarget)
  };
  // Called when the header of a RESULT frame arrives; returns the sink for
  // that stream or nullptr to buffer the frame.
  using SinkLookup = std::function<std::shared_ptr<CellSink>(int16_t stream)>;

  FrameDecoder(Options options, SinkLookup lookup);
  explicit FrameDecoder(SinkLookup lookup) : FrameDecoder(Options{}, std::move(lookup)) {}

  // Memory that the next read from the wire should fill. Never empty. Usually
  // read_chunk bytes of the receive buffer; the rest of a directed cell (the
  // sink's destination) or the next part of a large buffered body
  // (DecodedFrame::body, at most as much as has arrived of it, at least
  // read_chunk) when that is what comes next; and only a few KiB at cell
  // boundaries of a streamed result that has had a directed cell of 16 KiB
  // or more (read_chunk, if that is less), and, while the last streamed
  // result had one, at the next frame's header, rows prefix and first row,
  // so that the next large cell is not read into the buffer
  // (frame_decoder.cc, kLookahead).
  std::span<uint8_t> ReadTarget();
  // `n` bytes were written to the start of the span last returned by
  // ReadTarget(). Decodes as much as possible; complete frames are appended
  // to *out in wire order.
  Status Commit(size_t n, std::vector<DecodedFrame>* out);
  // Copies `data` through ReadTarget/Commit (tests, fuzzing).
  Status Feed(ByteView data, std::vector<DecodedFrame>* out);

  // Stream id of the frame being decoded, if its header has arrived.
  std::optional<int16_t> current_stream() const;
  // Stream id of the frame whose cell is being read into a sink's
  // destination (CellDestination handed out, OnCell not yet called), if any.
  std::optional<int16_t> directing_stream() const;
  // The reader will read no more into the span last returned by
  // ReadTarget() (no read is in flight into it) and gives the decoder up: a
  // destination it holds is given back (CellSink::OnCellAbandoned), and
  // Commit fails from now on. Idempotent; the destructor calls it.
  void Abandon();

  // Cell bytes received directly into sink destinations, and cell bytes that
  // had to be copied from the receive buffer into destinations.
  uint64_t direct_bytes() const { return direct_bytes_; }
  uint64_t copied_bytes() const { return copied_bytes_; }

  ~FrameDecoder();
  FrameDecoder(const FrameDecoder&) = delete;
  FrameDecoder& operator=(const FrameDecoder&) = delete;

 private:
  struct State;
  Options options_;
  SinkLookup lookup_;
  std::unique_ptr<State> state_;
  uint64_t direct_bytes_ = 0;
  uint64_t copied_bytes_ = 0;
};

}  // namespace cqlstream::cql

#endif  // CQLSTREAM_CQL_FRAME_DECODER_H_
