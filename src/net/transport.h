// Copyright (c) cqlstream authors.
//
// Transport: a byte stream to one server — plain TCP or TLS over TCP — with
// the two asynchronous operations a Connection needs. It is also the seam
// where tests inject faults (delays, drops, resets, truncation).
//
// Thread-safety: a Transport belongs to one Connection and is used only on
// that connection's I/O thread (its executor). Handlers run on that thread.
// Ownership: buffers passed to AsyncReadSome/AsyncWrite must stay valid until
// the handler runs.
#ifndef CQLSTREAM_NET_TRANSPORT_H_
#define CQLSTREAM_NET_TRANSPORT_H_

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "cqlstream/options.h"
#include "cqlstream/status.h"

namespace cqlstream::net {

class Transport {
 public:
  using Handler = std::function<void(std::error_code, size_t)>;
  virtual ~Transport() = default;
  // Reads at least one byte (or fails) into `into`.
  virtual void AsyncReadSome(std::span<uint8_t> into, Handler handler) = 0;
  // Writes all of `buffers` (or fails).
  virtual void AsyncWrite(std::vector<asio::const_buffer> buffers, Handler handler) = 0;
  // Closes the stream; pending operations complete with an error.
  virtual void Close() = 0;
  virtual asio::any_io_executor executor() = 0;
  // "127.0.0.1:9042" (the remote endpoint), and the local port.
  virtual std::string peer() const = 0;
  virtual uint16_t local_port() const = 0;
};

// Builds the OpenSSL context for TlsOptions: verification against the CA
// (ca_pem, else ca_file, else the system store) unless insecure_skip_verify,
// optional client certificate and key (the *_pem fields, else the files).
// An encrypted key is decrypted with tls.key_passphrase through OpenSSL's
// passphrase callback (never a terminal prompt); a missing or wrong
// passphrase is a TlsError naming the key, never the passphrase. Errors name
// the file (or the bundle entry) that could not be used.
StatusOr<std::shared_ptr<asio::ssl::context>> MakeTlsContext(const TlsOptions& tls);

struct TransportOptions {
  std::string host;  // IP or name
  uint16_t port = 9042;
  std::chrono::milliseconds connect_timeout{5000};
  // TLS when set. server_name: the name to verify (default: host).
  std::shared_ptr<asio::ssl::context> tls;
  std::string tls_server_name;
  bool tls_verify = true;
  // The name checked in the server certificate when it differs from the
  // server name sent (SNI routing: the SNI is a host id, see
  // sni_endpoint.h); "" checks the chain only. Unset: the server name.
  std::optional<std::string> tls_verify_name;
  // Local ports to bind before connecting, tried in order (ScyllaDB's
  // shard-aware port assigns the shard from the client's source port).
  // Empty: any port.
  std::vector<uint16_t> source_ports;
};

using TransportCallback = std::function<void(StatusOr<std::unique_ptr<Transport>>)>;

// A connect under way, as ConnectTransport hands it out, so that its owner
// can end it before its time-out (a session's shutdown:
// net/connection_registry.h).
//
// Ownership: the handle keeps the attempt's state alive; the attempt also
// holds itself until its callback has run, so dropping the handle does not
// end it. Thread-safety: Cancel may be called from any thread, any number of
// times, also after the callback has run (then it does nothing), while the
// io_context the connect runs on lives: it posts there, and takes effect
// when that context next runs handlers.
class PendingConnect {
 public:
  virtual ~PendingConnect() = default;
  // Ends the attempt: a TCP connect or TLS handshake under way is aborted
  // and the callback hears `why` (unless it has heard already). A name
  // lookup under way is not cut short (getaddrinfo, which asio's resolver
  // runs on a thread of its own, cannot be interrupted); the callback hears
  // `why` once it returns.
  virtual void Cancel(Status why) = 0;
};

// Resolves, connects (with timeout), binds a source port when asked, and
// performs the TLS handshake. The callback runs on `io`'s thread exactly once.
// Errors: ConnectFailed (resolution, refused, timeout, no free source port),
// ConnectionLost (the peer closed or reset the stream during the TLS
// handshake without a TLS alert, e.g. an SNI proxy that cannot route the
// server name; another node may answer) or TlsError (certificate
// verification failed, a TLS alert or another handshake failure, with
// OpenSSL's reason), or Cancel's status.
std::shared_ptr<PendingConnect> ConnectTransport(asio::io_context& io, TransportOptions options,
                                                 TransportCallback callback);

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_TRANSPORT_H_
