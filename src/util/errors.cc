// Copyright (c) cqlstream authors.
#include "cqlstream/errors.h"

#include <fmt/format.h>

namespace cqlstream {

std::string ServerErrorCodeName(int32_t code) {
  switch (static_cast<ServerErrorCode>(code)) {
    case ServerErrorCode::kServerError: return "ServerError";
    case ServerErrorCode::kProtocolError: return "ProtocolError";
    case ServerErrorCode::kAuthenticationError: return "AuthenticationError";
    case ServerErrorCode::kUnavailable: return "Unavailable";
    case ServerErrorCode::kOverloaded: return "Overloaded";
    case ServerErrorCode::kIsBootstrapping: return "IsBootstrapping";
    case ServerErrorCode::kTruncateError: return "TruncateError";
    case ServerErrorCode::kWriteTimeout: return "WriteTimeout";
    case ServerErrorCode::kReadTimeout: return "ReadTimeout";
    case ServerErrorCode::kReadFailure: return "ReadFailure";
    case ServerErrorCode::kFunctionFailure: return "FunctionFailure";
    case ServerErrorCode::kWriteFailure: return "WriteFailure";
    case ServerErrorCode::kCdcWriteFailure: return "CdcWriteFailure";
    case ServerErrorCode::kCasWriteUnknown: return "CasWriteUnknown";
    case ServerErrorCode::kSyntaxError: return "SyntaxError";
    case ServerErrorCode::kUnauthorized: return "Unauthorized";
    case ServerErrorCode::kInvalid: return "Invalid";
    case ServerErrorCode::kConfigError: return "ConfigError";
    case ServerErrorCode::kAlreadyExists: return "AlreadyExists";
    case ServerErrorCode::kUnprepared: return "Unprepared";
  }
  return fmt::format("Unknown(0x{:04x})", static_cast<uint32_t>(code));
}

std::string_view ConsistencyName(uint16_t c) {
  switch (c) {
    case 0x0000: return "ANY";
    case 0x0001: return "ONE";
    case 0x0002: return "TWO";
    case 0x0003: return "THREE";
    case 0x0004: return "QUORUM";
    case 0x0005: return "ALL";
    case 0x0006: return "LOCAL_QUORUM";
    case 0x0007: return "EACH_QUORUM";
    case 0x0008: return "SERIAL";
    case 0x0009: return "LOCAL_SERIAL";
    case 0x000A: return "LOCAL_ONE";
    default: return "UNKNOWN";
  }
}

std::string ServerError::ToString() const {
  std::string name = ServerErrorCodeName(code);
  switch (typed()) {
    case ServerErrorCode::kUnavailable:
      return fmt::format("{} (consistency {}, required {}, alive {}): {}", name,
                         ConsistencyName(consistency), required, alive, message);
    case ServerErrorCode::kWriteTimeout:
    case ServerErrorCode::kCasWriteUnknown:
      return fmt::format("{} (consistency {}, received {}, blockfor {}{}{}): {}", name,
                         ConsistencyName(consistency), alive, required,
                         write_type.empty() ? "" : ", write type ", write_type, message);
    case ServerErrorCode::kReadTimeout:
      return fmt::format("{} (consistency {}, received {}, blockfor {}, data present {}): {}", name,
                         ConsistencyName(consistency), alive, required, data_present, message);
    case ServerErrorCode::kReadFailure:
      return fmt::format("{} (consistency {}, received {}, blockfor {}, failures {}, data present {}): {}",
                         name, ConsistencyName(consistency), alive, required, num_failures,
                         data_present, message);
    case ServerErrorCode::kWriteFailure:
      return fmt::format("{} (consistency {}, received {}, blockfor {}, failures {}, write type {}): {}",
                         name, ConsistencyName(consistency), alive, required, num_failures,
                         write_type, message);
    case ServerErrorCode::kFunctionFailure:
      return fmt::format("{} ({}.{}): {}", name, keyspace, table, message);
    case ServerErrorCode::kAlreadyExists:
      return fmt::format("{} ({}{}{}): {}", name, keyspace, table.empty() ? "" : ".", table, message);
    case ServerErrorCode::kUnprepared:
      return fmt::format("{} (statement id of {} bytes): {}", name, unprepared_id.size(), message);
    default:
      return fmt::format("{}: {}", name, message);
  }
}

}  // namespace cqlstream
