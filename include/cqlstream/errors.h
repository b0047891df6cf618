// Copyright (c) cqlstream authors.
//
// ServerError: a decoded CQL ERROR response (native protocol v4, section 9),
// carried by Status::server_error(). Every error code of the protocol is
// listed; the code-specific fields are filled for the codes that have them.
//
// Thread-safety: plain value type; immutable once shared through a Status.
#ifndef CQLSTREAM_ERRORS_H_
#define CQLSTREAM_ERRORS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cqlstream {

enum class ServerErrorCode : int32_t {
  kServerError = 0x0000,
  kProtocolError = 0x000A,
  kAuthenticationError = 0x0100,
  kUnavailable = 0x1000,
  kOverloaded = 0x1001,
  kIsBootstrapping = 0x1002,
  kTruncateError = 0x1003,
  kWriteTimeout = 0x1100,
  kReadTimeout = 0x1200,
  kReadFailure = 0x1300,
  kFunctionFailure = 0x1400,
  kWriteFailure = 0x1500,
  kCdcWriteFailure = 0x1600,   // v5
  kCasWriteUnknown = 0x1700,   // v5
  kSyntaxError = 0x2000,
  kUnauthorized = 0x2100,
  kInvalid = 0x2200,
  kConfigError = 0x2300,
  kAlreadyExists = 0x2400,
  kUnprepared = 0x2500,
};

// Name of a server error code as written in the spec ("Unavailable", ...),
// or "Unknown(0x....)" for codes the spec does not define.
std::string ServerErrorCodeName(int32_t code);

struct ServerError {
  int32_t code = 0;        // a ServerErrorCode value, or an unknown code
  std::string message;     // the server's [string] message

  // Unavailable, WriteTimeout, ReadTimeout, ReadFailure, WriteFailure,
  // CasWriteUnknown: the consistency level and replica counts.
  uint16_t consistency = 0;
  int32_t required = 0;    // Unavailable: required; timeouts/failures: blockfor
  int32_t alive = 0;       // Unavailable: alive;   timeouts/failures: received
  int32_t num_failures = 0;    // ReadFailure / WriteFailure
  bool data_present = false;   // ReadTimeout / ReadFailure
  std::string write_type;      // WriteTimeout / WriteFailure ("SIMPLE", "BATCH", ...)

  // FunctionFailure: keyspace, function and argument types.
  // AlreadyExists: keyspace and table (table empty for a keyspace).
  std::string keyspace;
  std::string table;           // AlreadyExists table, or FunctionFailure function
  std::vector<std::string> arg_types;

  // Unprepared: the statement id the server does not know.
  std::string unprepared_id;

  ServerErrorCode typed() const { return static_cast<ServerErrorCode>(code); }
  // "Unavailable (consistency ONE, required 1, alive 0): <message>"
  std::string ToString() const;
};

// Name of a CQL consistency level ("ONE", "LOCAL_QUORUM", ...).
std::string_view ConsistencyName(uint16_t consistency);

}  // namespace cqlstream

#endif  // CQLSTREAM_ERRORS_H_
