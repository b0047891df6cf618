// Copyright (c) cqlstream authors.
//
// Status and StatusOr<T>: errors as values inside the cqlstream core.
//
// A Status is either OK or carries a Code, a human-readable message and, for
// errors returned by a CQL server, the decoded ServerError (error code and the
// code-specific fields). Exceptions are used only at the Python and DALI edges.
//
// Thread-safety: Status and StatusOr are values. Distinct objects may be used
// from different threads freely; a single object needs external
// synchronization if one thread mutates it while another reads it. Copies
// share the (immutable) ServerError detail.
#ifndef CQLSTREAM_STATUS_H_
#define CQLSTREAM_STATUS_H_

#include <cassert>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace cqlstream {

struct ServerError;  // defined in cqlstream/errors.h

class [[nodiscard]] Status {
 public:
  // Client-side and server-side error classes. Server errors keep their
  // precise CQL error code in server_error().
  enum class Code : uint8_t {
    kOk = 0,
    kInvalidArgument,   // bad input from the caller (options, identifiers, files)
    kNotFound,          // a named thing does not exist (dataset, row, file)
    kAlreadyExists,     // a named thing exists with another definition
    kCorruption,        // bytes do not match their checksum or size
    kIOError,           // local file-system error
    kTimeout,           // a request got no answer in time (client side)
    kConnectionLost,    // the connection closed while the request was in flight
    kConnectFailed,     // could not open a connection to any host
    kProtocolError,     // the peer violated the protocol (malformed frame)
    kFrameTooLarge,     // a frame larger than the configured maximum
    kTlsError,          // TLS handshake or certificate verification failed
    kAuthError,         // authentication failed (client or server side)
    kServerError,       // any other error returned by the server; see server_error()
    kOverloaded,        // too many requests in flight / byte budget exhausted
    kCancelled,         // the operation was cancelled by its owner
    kUnsupported,       // the peer or the data needs a feature we do not have
    kInternal,          // a bug in cqlstream
  };

  Status() noexcept = default;
  Status(Code code, std::string message);
  Status(Code code, std::string message, std::shared_ptr<const ServerError> server_error);

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {Code::kAlreadyExists, std::move(m)}; }
  static Status Corruption(std::string m) { return {Code::kCorruption, std::move(m)}; }
  static Status IOError(std::string m) { return {Code::kIOError, std::move(m)}; }
  static Status Timeout(std::string m) { return {Code::kTimeout, std::move(m)}; }
  static Status ConnectionLost(std::string m) { return {Code::kConnectionLost, std::move(m)}; }
  static Status ConnectFailed(std::string m) { return {Code::kConnectFailed, std::move(m)}; }
  static Status ProtocolError(std::string m) { return {Code::kProtocolError, std::move(m)}; }
  static Status FrameTooLarge(std::string m) { return {Code::kFrameTooLarge, std::move(m)}; }
  static Status TlsError(std::string m) { return {Code::kTlsError, std::move(m)}; }
  static Status AuthError(std::string m) { return {Code::kAuthError, std::move(m)}; }
  static Status Overloaded(std::string m) { return {Code::kOverloaded, std::move(m)}; }
  static Status Cancelled(std::string m) { return {Code::kCancelled, std::move(m)}; }
  static Status Unsupported(std::string m) { return {Code::kUnsupported, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
  // A server ERROR response; Code is derived from the server error code
  // (e.g. Overloaded -> kOverloaded, bad credentials -> kAuthError).
  static Status FromServer(std::shared_ptr<const ServerError> e);

  bool ok() const noexcept { return rep_ == nullptr; }
  Code code() const noexcept { return rep_ ? rep_->code : Code::kOk; }
  // The message without the code prefix; empty when ok().
  const std::string& message() const noexcept;
  // The decoded server error, or nullptr when the error did not come from a server.
  const ServerError* server_error() const noexcept { return rep_ ? rep_->server.get() : nullptr; }
  std::shared_ptr<const ServerError> server_error_ptr() const noexcept {
    return rep_ ? rep_->server : nullptr;
  }

  bool IsTimeout() const noexcept { return code() == Code::kTimeout; }
  bool IsNotFound() const noexcept { return code() == Code::kNotFound; }
  bool IsConnectionLost() const noexcept { return code() == Code::kConnectionLost; }

  // "CodeName: message" (or "OK").
  std::string ToString() const;
  // Returns a copy whose message is "<context>: <message>".
  Status WithContext(std::string_view context) const;

  static std::string_view CodeName(Code c) noexcept;

 private:
  struct Rep {
    Code code;
    std::string message;
    std::shared_ptr<const ServerError> server;
  };
  std::shared_ptr<const Rep> rep_;  // nullptr == OK; immutable, cheap to copy
};

// StatusOr<T> holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status s) : v_(std::move(s)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "StatusOr constructed from OK status");
    if (std::get<Status>(v_).ok()) v_ = Status::Internal("StatusOr constructed from OK status");
  }
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  template <typename U, typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                                    !std::is_same_v<std::decay_t<U>, Status> &&
                                                    !std::is_same_v<std::decay_t<U>, T>>>
  StatusOr(U&& u) : v_(T(std::forward<U>(u))) {}  // NOLINT(google-explicit-constructor)

  bool ok() const noexcept { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::OK() : std::get<Status>(v_); }

  // REQUIRES: ok()
  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace cqlstream

// Early-return helpers for functions that return Status or StatusOr.
#define CQLS_CONCAT_INNER_(a, b) a##b
#define CQLS_CONCAT_(a, b) CQLS_CONCAT_INNER_(a, b)

#define CQLS_RETURN_IF_ERROR(expr)                 \
  do {                                             \
    ::cqlstream::Status cqls_status_ = (expr);     \
    if (!cqls_status_.ok()) return cqls_status_;   \
  } while (0)

#define CQLS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#define CQLS_ASSIGN_OR_RETURN(lhs, expr) \
  CQLS_ASSIGN_OR_RETURN_IMPL_(CQLS_CONCAT_(cqls_statusor_, __LINE__), lhs, expr)

#endif  // CQLSTREAM_STATUS_H_
