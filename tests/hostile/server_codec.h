// Copyright (c) cqlstream authors.
//
// Test-only: the server side of the CQL v4 codec, which src/cql does not have
// (it encodes requests and decodes responses). Decodes the requests a client
// sends (QUERY, PREPARE, EXECUTE parameters) and encodes the responses a
// server sends (RESULT Rows / Prepared / Void, ERROR, READY, SUPPORTED,
// EVENT), on top of src/cql's Writer/Reader and the cell encoder of
// cqlstream/value.h.
//
// A Table is a result set in the making: typed columns and rows of Values.
//
// Thread-safety: plain functions and value types.
#ifndef CQLSTREAM_TESTS_HOSTILE_SERVER_CODEC_H_
#define CQLSTREAM_TESTS_HOSTILE_SERVER_CODEC_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cql/frame.h"
#include "cql/wire.h"
#include "cqlstream/status.h"
#include "cqlstream/value.h"

namespace cqlstream::hostile {

// A request frame as read from the socket.
struct RequestFrame {
  cql::FrameHeader header;
  cql::Bytes body;
};

// Parameters of a QUERY or EXECUTE (spec 4.1.4), values kept as raw cells.
struct RequestParams {
  std::string query;        // QUERY / PREPARE text
  cql::Bytes prepared_id;   // EXECUTE
  uint16_t consistency = 0;
  uint8_t flags = 0;
  std::vector<std::optional<cql::Bytes>> values;
  int32_t page_size = -1;
  std::optional<cql::Bytes> paging_state;
  bool skip_metadata() const { return (flags & 0x02) != 0; }
};

// Decodes the body of a QUERY, PREPARE or EXECUTE request.
StatusOr<RequestParams> DecodeRequest(const RequestFrame& f);

struct Column {
  std::string name;
  DataType type;
};

struct Table {
  std::string keyspace;
  std::string name;
  std::vector<Column> columns;
  std::vector<std::vector<Value>> rows;  // Value::Null() for a null cell
};

// A whole frame: 9-byte response header + body.
cql::Bytes Frame(cql::Opcode op, int16_t stream, const cql::Bytes& body,
                 uint8_t version = cql::kProtocolVersion | cql::kResponseBit);

// Encodes a type [option] (spec 4.2.5.2).
void PutType(cql::Writer& w, const DataType& t);

// RESULT Rows of rows [first, first + count) of `t`. With more rows after
// them, the metadata carries has_more_pages and a paging state that names
// the next row; with `more_state`, has_more_pages and that paging state
// whatever follows. skip_metadata: the NO_METADATA flag instead of column
// specs.
cql::Bytes RowsBody(const Table& t, size_t first, size_t count, bool skip_metadata,
                    const cql::Bytes* more_state = nullptr);
// Paginates by the request's page size and paging state.
cql::Bytes RowsBodyForRequest(const Table& t, const RequestParams& p);

// RESULT Prepared: id, bind markers (with the partition-key indexes) and the
// result columns.
cql::Bytes PreparedBody(const cql::Bytes& id, const Table& binds, const std::vector<uint16_t>& pk_indexes,
                        const Table& result);
cql::Bytes VoidBody();
// ERROR: code and message; UNPREPARED (0x2500) carries `unprepared_id`.
cql::Bytes ErrorBody(int32_t code, const std::string& message, const cql::Bytes& unprepared_id = {});
cql::Bytes SupportedBody(const std::map<std::string, std::vector<std::string>>& options);
// EVENT STATUS_CHANGE (UP/DOWN) of `address` (4 bytes) : port.
cql::Bytes StatusEventBody(const std::string& change, const std::vector<uint8_t>& address, int32_t port);

// The first page's paging state names the next row: 4 bytes, big-endian.
size_t PagingOffset(const RequestParams& p);

}  // namespace cqlstream::hostile

#endif  // CQLSTREAM_TESTS_HOSTILE_SERVER_CODEC_H_
