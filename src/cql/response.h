// Copyright (c) cqlstream authors.
//
// Response messages (spec section 4.2) decoded from a complete, buffered
// frame body: ERROR, READY, AUTHENTICATE, SUPPORTED, RESULT (Void, Rows,
// Set_keyspace, Prepared, Schema_change), EVENT, AUTH_CHALLENGE, AUTH_SUCCESS.
// The frame flags are honoured: a tracing id, warnings and a custom payload
// that precede the body are decoded (warnings are kept); a compressed frame is
// refused (cqlstream never negotiates compression).
//
// Ownership: Rows owns the body it was decoded from and hands out views
// (spans) into it; views are valid as long as the Rows object lives.
// Thread-safety: value types; a const Rows may be read from many threads.
#ifndef CQLSTREAM_CQL_RESPONSE_H_
#define CQLSTREAM_CQL_RESPONSE_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "cql/frame.h"
#include "cql/wire.h"
#include "cqlstream/errors.h"
#include "cqlstream/status.h"
#include "cqlstream/value.h"

namespace cqlstream::cql {

// The most columns a result (or bind markers a prepared statement) may have;
// larger counts are rejected as a ProtocolError before any memory is reserved.
inline constexpr int32_t kMaxColumns = 1 << 16;

struct ColumnSpec {
  std::string keyspace;
  std::string table;
  std::string name;
  DataType type;
  // The same keyspace, table, name and type.
  bool operator==(const ColumnSpec&) const = default;
};

// <metadata> of a Rows result or of a Prepared result's result metadata.
struct RowsMetadata {
  static constexpr int32_t kGlobalTablesSpec = 0x0001;
  static constexpr int32_t kHasMorePages = 0x0002;
  static constexpr int32_t kNoMetadata = 0x0004;

  int32_t flags = 0;
  int32_t column_count = 0;
  std::optional<Bytes> paging_state;   // set when there are more pages
  std::vector<ColumnSpec> columns;     // empty when kNoMetadata or specs_matched
  // A Prepared result's result metadata only (DecodePrepared): the wire
  // bytes of its column specs, <global_table_spec>?<col_spec_1>...<col_spec_n>,
  // which the answers of the statement are compared with byte for byte
  // (DecodeRowsMetadata's `expected`). Empty for an answer's metadata.
  Bytes specs_wire;
  // An answer decoded against `expected` columns whose column specs were
  // byte for byte expected->specs_wire: `expected` itself (so that a reader
  // can tell whose expectation matched), `columns` left empty, and the
  // answer's columns are the expected ones. Only compared with, never read
  // through: a copy of this metadata may outlive the expectation.
  const RowsMetadata* specs_matched = nullptr;
  bool has_more_pages() const { return paging_state.has_value(); }
};

// Decodes <metadata> from `r`. Exposed for the streaming decoder.
//
// With `expected` (a Prepared result's metadata, whose specs_wire is not
// empty), an answer with metadata whose global-tables-spec flag and column
// count are expected's, and whose column specs are byte for byte
// expected->specs_wire, is not decoded into ColumnSpecs: its specs are
// skipped and md->specs_matched is set to `expected`. Equal bytes decode to equal
// columns, so this is the comparison of names and types that a reader
// checking its answers would make, without a string or a type built per
// answer. Any other answer is decoded in full, as without `expected`.
Status DecodeRowsMetadata(Reader& r, RowsMetadata* md, const RowsMetadata* expected = nullptr);

// The address of an inet cell: 4 (IPv4) or 16 (IPv6) bytes.
struct InetAddress {
  Bytes bytes;
  std::string ToString() const { return FormatAddress(bytes); }
};

// A decoded Rows result. Cells are addressed by (row, column).
class Rows {
 public:
  Rows() = default;
  const RowsMetadata& metadata() const { return metadata_; }
  int32_t row_count() const { return row_count_; }
  int32_t column_count() const { return metadata_.column_count; }
  // nullopt for a null cell. REQUIRES: row < row_count(), col < column_count().
  std::optional<ByteView> cell(int32_t row, int32_t col) const;
  // Decodes a cell with its column type (needs metadata, i.e. no kNoMetadata).
  StatusOr<Value> value(int32_t row, int32_t col) const;
  // Index of the column called `name`, or -1.
  int32_t column_index(std::string_view name) const;
  // Bytes of the result body these rows were decoded from (0 when built
  // without one): what a read that keeps rows counts against its bound.
  int64_t body_bytes() const { return body_ ? static_cast<int64_t>(body_->size()) : 0; }

  // Typed getters (rows_get.cc). The column's type in the result metadata
  // must fit T, else the answer is a ProtocolError naming the column, its
  // type and the expected one; so is an absent column (by name) and a cell
  // that does not decode. Get() also refuses a null cell; GetOptional()
  // returns nullopt for it. A row or column index outside the result, or a
  // result without metadata, is InvalidArgument (a caller's mistake).
  // T and the CQL types it fits:
  //   std::string: ascii, text      int32_t: int     int64_t: bigint, counter
  //   bool: boolean                 double: double   Uuid: uuid, timeuuid
  //   InetAddress: inet             ByteView: blob (a view into this Rows)
  //   std::vector<std::string>: list/set of ascii/text
  //   std::vector<int32_t>: list/set of int   std::vector<int64_t>: list/set of bigint
  //   std::map<std::string, std::string>: map of ascii/text to ascii/text
  //   Value: any type (decoded as cqlstream/value.h does)
  template <typename T>
  StatusOr<T> Get(int32_t row, int32_t col) const;
  template <typename T>
  StatusOr<T> Get(int32_t row, std::string_view column) const;
  template <typename T>
  StatusOr<std::optional<T>> GetOptional(int32_t row, int32_t col) const;
  template <typename T>
  StatusOr<std::optional<T>> GetOptional(int32_t row, std::string_view column) const;
  // Index of `column`, checked to be present with a type that fits T: check
  // the requested columns once, before reading rows (also for an empty result).
  template <typename T>
  StatusOr<int32_t> ColumnOf(std::string_view column) const;

  // Builds Rows from an owned body; `r` reads *body and stands at the
  // <metadata> of the Rows result (right after the kind). Validates every
  // cell length against the body.
  static StatusOr<Rows> Decode(std::shared_ptr<const Bytes> body, Reader& r);
  // Lets callers supply metadata when the result was requested with
  // skip_metadata (prepared statements).
  void set_metadata_columns(std::vector<ColumnSpec> columns) { metadata_.columns = std::move(columns); }

 private:
  RowsMetadata metadata_;
  int32_t row_count_ = 0;
  std::shared_ptr<const Bytes> body_;
  // Per cell: offset of the cell bytes in body_, or -1 for null; and length.
  std::vector<std::pair<int64_t, int32_t>> cells_;
};

struct PreparedMetadata {
  int32_t flags = 0;
  std::vector<ColumnSpec> bind_columns;     // one per bind marker
  std::vector<uint16_t> pk_indexes;         // bind marker index of each partition-key component
};

struct Prepared {
  Bytes id;
  PreparedMetadata bind_metadata;
  RowsMetadata result_metadata;
};

struct SchemaChange {
  std::string change_type;   // CREATED / UPDATED / DROPPED
  std::string target;        // KEYSPACE / TABLE / TYPE / FUNCTION / AGGREGATE
  std::string keyspace;
  std::string name;          // table/type/function name (empty for KEYSPACE)
  std::vector<std::string> arg_types;  // FUNCTION / AGGREGATE
};

struct ResultVoid {};
struct ResultSetKeyspace { std::string keyspace; };
using Result = std::variant<ResultVoid, Rows, ResultSetKeyspace, Prepared, SchemaChange>;

struct Ready {};
struct Authenticate { std::string authenticator; };
struct Supported { std::map<std::string, std::vector<std::string>> options; };
struct AuthChallenge { std::optional<Bytes> token; };
struct AuthSuccess { std::optional<Bytes> token; };

struct TopologyChangeEvent { std::string change; Inet address; };  // NEW_NODE / REMOVED_NODE / MOVED_NODE
struct StatusChangeEvent { std::string change; Inet address; };    // UP / DOWN
struct SchemaChangeEvent { SchemaChange change; };
using Event = std::variant<TopologyChangeEvent, StatusChangeEvent, SchemaChangeEvent>;

using Message = std::variant<ServerError, Ready, Authenticate, Supported, Result, Event,
                             AuthChallenge, AuthSuccess>;

struct Response {
  FrameHeader header;
  std::optional<std::array<uint8_t, 16>> tracing_id;
  std::vector<std::string> warnings;
  Message message;
};

// Decodes a complete frame body. A malformed body is a ProtocolError that
// names the opcode and what was wrong.
StatusOr<Response> DecodeResponse(const FrameHeader& header, Bytes body);

// Reads the frame-flag preamble (tracing id, warnings, custom payload) that
// precedes every response body. Exposed for the streaming decoder.
Status DecodePreamble(uint8_t flags, Reader& r, std::optional<std::array<uint8_t, 16>>* tracing_id,
                      std::vector<std::string>* warnings);

// Decodes an ERROR body (spec section 9) into a ServerError.
Status DecodeError(Reader& r, ServerError* e);

// Decodes an [option] type description (spec 4.2.5.2). `depth` is the
// nesting level of the type being decoded; types nested deeper than
// kMaxTypeDepth (cqlstream/value.h) are a ProtocolError.
Status DecodeType(Reader& r, DataType* t, int depth = 0);

}  // namespace cqlstream::cql

#endif  // CQLSTREAM_CQL_RESPONSE_H_
