// Copyright (c) cqlstream authors.
#include "cqlstream/status.h"

#include "cqlstream/errors.h"

namespace cqlstream {

Status::Status(Code code, std::string message)
    : Status(code, std::move(message), nullptr) {}

Status::Status(Code code, std::string message, std::shared_ptr<const ServerError> server_error) {
  if (code == Code::kOk) return;
  rep_ = std::make_shared<const Rep>(Rep{code, std::move(message), std::move(server_error)});
}

Status Status::FromServer(std::shared_ptr<const ServerError> e) {
  Code c = Code::kServerError;
  switch (e->typed()) {
    case ServerErrorCode::kOverloaded:
      c = Code::kOverloaded;
      break;
    case ServerErrorCode::kAuthenticationError:
    case ServerErrorCode::kUnauthorized:
      c = Code::kAuthError;
      break;
    case ServerErrorCode::kProtocolError:
      c = Code::kProtocolError;
      break;
    case ServerErrorCode::kAlreadyExists:
      c = Code::kAlreadyExists;
      break;
    default:
      break;
  }
  std::string msg = e->ToString();
  return Status(c, std::move(msg), std::move(e));
}

const std::string& Status::message() const noexcept {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

std::string_view Status::CodeName(Code c) noexcept {
  switch (c) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kNotFound: return "NotFound";
    case Code::kAlreadyExists: return "AlreadyExists";
    case Code::kCorruption: return "Corruption";
    case Code::kIOError: return "IOError";
    case Code::kTimeout: return "Timeout";
    case Code::kConnectionLost: return "ConnectionLost";
    case Code::kConnectFailed: return "ConnectFailed";
    case Code::kProtocolError: return "ProtocolError";
    case Code::kFrameTooLarge: return "FrameTooLarge";
    case Code::kTlsError: return "TlsError";
    case Code::kAuthError: return "AuthError";
    case Code::kServerError: return "ServerError";
    case Code::kOverloaded: return "Overloaded";
    case Code::kCancelled: return "Cancelled";
    case Code::kUnsupported: return "Unsupported";
    case Code::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(CodeName(code()));
  s += ": ";
  s += rep_->message;
  return s;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += rep_->message;
  return Status(rep_->code, std::move(m), rep_->server);
}

}  // namespace cqlstream
