// Copyright (c) cqlstream authors.
//
// Request messages (spec section 4.1). Each Encode* function returns a
// complete frame — 9-byte header with stream id 0 followed by the body — so
// that a connection only has to patch the stream id (PatchStreamId) before it
// writes the bytes. Nothing here touches a socket.
//
// Thread-safety: pure functions.
#ifndef CQLSTREAM_CQL_REQUEST_H_
#define CQLSTREAM_CQL_REQUEST_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cql/frame.h"
#include "cql/wire.h"
#include "cqlstream/status.h"
#include "cqlstream/value.h"

namespace cqlstream::cql {

enum class Consistency : uint16_t {
  kAny = 0x0000,
  kOne = 0x0001,
  kTwo = 0x0002,
  kThree = 0x0003,
  kQuorum = 0x0004,
  kAll = 0x0005,
  kLocalQuorum = 0x0006,
  kEachQuorum = 0x0007,
  kSerial = 0x0008,
  kLocalSerial = 0x0009,
  kLocalOne = 0x000A,
};

// An encoded request frame (header + body), stream id still 0.
struct RequestFrame {
  Opcode opcode = Opcode::kOptions;
  Bytes bytes;
};

// Query parameters shared by QUERY and EXECUTE (spec 4.1.4):
//   <consistency><flags:byte>[<n><value_1>...<value_n>][<result_page_size>]
//   [<paging_state>][<serial_consistency>][<timestamp>]
struct QueryParameters {
  Consistency consistency = Consistency::kLocalOne;
  std::vector<Value> values;                // positional bind values
  std::vector<std::string> value_names;     // when non-empty: named values (same length)
  // Types of the bind markers, from PREPARE metadata; when empty each value
  // is encoded with its natural type (EncodeCellNatural).
  const std::vector<DataType>* value_types = nullptr;
  bool skip_metadata = false;
  int32_t page_size = -1;                   // <= 0: no paging
  std::optional<Bytes> paging_state;
  std::optional<Consistency> serial_consistency;
  std::optional<int64_t> default_timestamp; // microseconds
};

RequestFrame EncodeStartup(const std::map<std::string, std::string>& options);
RequestFrame EncodeOptions();
RequestFrame EncodeAuthResponse(std::optional<ByteView> token);
RequestFrame EncodeRegister(const std::vector<std::string>& event_types);
StatusOr<RequestFrame> EncodeQuery(std::string_view query, const QueryParameters& params);
RequestFrame EncodePrepare(std::string_view query);
StatusOr<RequestFrame> EncodeExecute(ByteView prepared_id, const QueryParameters& params);

enum class BatchType : uint8_t { kLogged = 0, kUnlogged = 1, kCounter = 2 };

struct BatchStatement {
  // Exactly one of query / prepared_id is set.
  std::optional<std::string> query;
  std::optional<Bytes> prepared_id;
  std::vector<Value> values;
  const std::vector<DataType>* value_types = nullptr;
};

StatusOr<RequestFrame> EncodeBatch(BatchType type, const std::vector<BatchStatement>& statements,
                                   Consistency consistency,
                                   std::optional<Consistency> serial_consistency = std::nullopt,
                                   std::optional<int64_t> default_timestamp = std::nullopt);

// SASL PLAIN initial response for PasswordAuthenticator: "\0user\0password".
Bytes PlainSaslToken(std::string_view user, std::string_view password);

}  // namespace cqlstream::cql

#endif  // CQLSTREAM_CQL_REQUEST_H_
