// Copyright (c) cqlstream authors.
//
// Request messages (spec section 4.1). Each Encode* function returns a
// complete frame — 9-byte header with stream id 0 followed by the body — so
// that a connection only has to patch the stream id (PatchStreamId) before it
// writes the bytes (large blobs bound with Value::Shared stay where they lie,
// as splices). Nothing here touches a socket.
//
// Thread-safety: pure functions.
#ifndef CQLSTREAM_CQL_REQUEST_H_
#define CQLSTREAM_CQL_REQUEST_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
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

// Bytes of a request that are not in RequestFrame::bytes: they follow its
// first `at` bytes (and any earlier splice), and `keep` keeps them alive.
// The encoders make one for each blob bound with Value::Shared of at least
// kSplicedBlobBytes, so that its bytes are written to the socket from where
// they lie, not copied into the request first (an ingest's ~100 kB blobs:
// the copy was 6% of its client CPU).
struct Splice {
  size_t at = 0;
  std::span<const uint8_t> bytes;
  std::shared_ptr<const void> keep;
};
inline constexpr size_t kSplicedBlobBytes = 8192;

// An encoded request frame (header + body), stream id still 0: `bytes` with
// `splices` inserted, in order of `at` (every `at` past the header).
struct RequestFrame {
  Opcode opcode = Opcode::kOptions;
  Bytes bytes;
  std::vector<Splice> splices;

  // The frame's size, splices included.
  size_t size() const;
  // The frame as one buffer.
  Bytes Flatten() const;
  // Calls f(std::span<const uint8_t>) for each non-empty piece of the frame
  // in order, leaving out its first `from` bytes.
  template <typename F>
  void ForEachPiece(size_t from, F&& f) const {
    size_t done = 0;  // of the frame, before the piece at hand
    auto piece = [&](std::span<const uint8_t> p) {
      const size_t skip = from > done ? std::min(from - done, p.size()) : 0;
      done += p.size();
      if (skip < p.size()) f(p.subspan(skip));
    };
    size_t pos = 0;
    for (const Splice& s : splices) {
      piece(std::span<const uint8_t>(bytes).subspan(pos, s.at - pos));
      piece(s.bytes);
      pos = s.at;
    }
    piece(std::span<const uint8_t>(bytes).subspan(pos));
  }
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
