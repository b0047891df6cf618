// Copyright (c) cqlstream authors.
//
// Result-column checks: whether an answer is the answer of the prepared
// statement it came back for. A prepared statement's EXECUTE normally asks
// the server to leave out the result metadata (skip_metadata) and takes the
// columns it was prepared with; an answer then carries nothing that names
// its statement, and a server that answers a stream id twice or late can
// hand one statement's rows to another of the same column count.
// A statement with `Statement::check_result_columns` asks for the metadata
// and its answer must name the same keyspace, table, column names and types,
// in the same order, as the statement was prepared with; anything else is a
// Corruption naming both, and its cells never reach the statement's sink.
// The price is the metadata in every answer (a few dozen bytes for the
// narrow reads, about 100 for the data read of 8 columns) and a byte
// comparison: a ColumnCheckingSink gives the decoder the column specs'
// wire bytes of the PREPARED answer (RowsMetadata::specs_wire), and an
// answer whose specs are the same bytes is not decoded into names and types
// (cql::DecodeRowsMetadata). Only an answer whose bytes differ is decoded
// and compared name by name (and counted: a server that encodes the same
// columns otherwise passes, at the price of that decoding).
//
// Thread-safety: CheckResultColumns is a pure function; a ColumnCheckingSink
// is used by one execution on its connection's I/O thread, like the sink it
// wraps; its counter is atomic. Ownership: the sink shares the prepared
// statement, the host and the counter, and owns its reference to the
// wrapped sink.
#ifndef CQLSTREAM_NET_RESULT_COLUMNS_H_
#define CQLSTREAM_NET_RESULT_COLUMNS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "cql/frame_decoder.h"
#include "cql/response.h"
#include "cqlstream/status.h"
#include "net/session.h"
#include "net/topology.h"

namespace cqlstream::net {

// Whether `a` and `b` name the same columns: keyspace, table, name and type
// of each, in order (and the same column count).
bool SameResultColumns(const cql::RowsMetadata& a, const cql::RowsMetadata& b);

// "ks.table(name type, ...)" for messages: at most 8 columns, each
// identifier cut to 64 bytes, so that a hostile answer cannot make it large.
std::string DescribeColumns(const cql::RowsMetadata& md);

// OK when `answer` carries the columns `prepared` was prepared with; a
// Corruption naming `host`, the statement and both column lists otherwise
// (also when the answer left its metadata out). The host's endpoint is
// formatted only for the Corruption: the check runs on every answer of a
// statement that asks for it.
Status CheckResultColumns(const PreparedStatement& prepared, const cql::RowsMetadata& answer, const Host& host);

// A CellSink that checks the answer's columns (OnRowsBegin) before it lets
// any call through to `inner`. The answer's column specs are compared as
// bytes with the prepared statement's (ExpectedColumns); an answer whose
// bytes differ is decoded, checked with CheckResultColumns and, when it
// passes, counted in `decoded` (may be null).
class ColumnCheckingSink final : public cql::CellSink {
 public:
  // `host` (not null) answers the execution; it is named only in a
  // Corruption.
  ColumnCheckingSink(std::shared_ptr<cql::CellSink> inner, PreparedPtr prepared, HostPtr host,
                     std::shared_ptr<std::atomic<uint64_t>> decoded = nullptr)
      : inner_(std::move(inner)), prepared_(std::move(prepared)), host_(std::move(host)),
        decoded_(std::move(decoded)) {}
  const cql::RowsMetadata* ExpectedColumns() const override {
    return prepared_->result_metadata.specs_wire.empty() ? nullptr : &prepared_->result_metadata;
  }
  Status OnRowsBegin(const cql::RowsMetadata& metadata, int32_t row_count) override;
  std::span<uint8_t> CellDestination(int32_t row, int32_t col, int32_t size) override {
    return inner_->CellDestination(row, col, size);
  }
  Status OnCell(int32_t row, int32_t col, std::optional<cql::ByteView> data) override {
    return inner_->OnCell(row, col, data);
  }
  void OnCellAbandoned(int32_t row, int32_t col) override { inner_->OnCellAbandoned(row, col); }

 private:
  std::shared_ptr<cql::CellSink> inner_;
  PreparedPtr prepared_;
  HostPtr host_;
  std::shared_ptr<std::atomic<uint64_t>> decoded_;
};

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_RESULT_COLUMNS_H_
