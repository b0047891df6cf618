// Copyright (c) cqlstream authors.
#include "net/transport.h"

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <optional>

namespace cqlstream::net {
namespace {

using asio::ip::tcp;

std::string Endpoint(const tcp::endpoint& ep) {
  std::error_code ec;
  auto a = ep.address();
  if (a.is_v6()) return fmt::format("[{}]:{}", a.to_string(), ep.port());
  return fmt::format("{}:{}", a.to_string(), ep.port());
}

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(tcp::socket s) : s_(std::move(s)) {
    std::error_code ec;
    peer_ = Endpoint(s_.remote_endpoint(ec));
    local_port_ = s_.local_endpoint(ec).port();
  }
  void AsyncReadSome(std::span<uint8_t> into, Handler h) override {
    s_.async_read_some(asio::buffer(into.data(), into.size()), std::move(h));
  }
  void AsyncWrite(std::vector<asio::const_buffer> b, Handler h) override {
    asio::async_write(s_, std::move(b), std::move(h));
  }
  void Close() override {
    std::error_code ec;
    s_.shutdown(tcp::socket::shutdown_both, ec);
    s_.close(ec);
  }
  asio::any_io_executor executor() override { return s_.get_executor(); }
  std::string peer() const override { return peer_; }
  uint16_t local_port() const override { return local_port_; }

 private:
  tcp::socket s_;
  std::string peer_;
  uint16_t local_port_ = 0;
};

class TlsTransport final : public Transport {
 public:
  explicit TlsTransport(std::unique_ptr<asio::ssl::stream<tcp::socket>> s) : s_(std::move(s)) {
    std::error_code ec;
    peer_ = Endpoint(s_->next_layer().remote_endpoint(ec));
    local_port_ = s_->next_layer().local_endpoint(ec).port();
  }
  void AsyncReadSome(std::span<uint8_t> into, Handler h) override {
    s_->async_read_some(asio::buffer(into.data(), into.size()), std::move(h));
  }
  void AsyncWrite(std::vector<asio::const_buffer> b, Handler h) override {
    asio::async_write(*s_, std::move(b), std::move(h));
  }
  void Close() override {
    // No TLS close_notify round trip: the connection is going away and the
    // peer may be gone; closing the socket is enough for the CQL protocol.
    std::error_code ec;
    s_->next_layer().shutdown(tcp::socket::shutdown_both, ec);
    s_->next_layer().close(ec);
  }
  asio::any_io_executor executor() override { return s_->get_executor(); }
  std::string peer() const override { return peer_; }
  uint16_t local_port() const override { return local_port_; }

 private:
  std::unique_ptr<asio::ssl::stream<tcp::socket>> s_;
  std::string peer_;
  uint16_t local_port_ = 0;
};

bool IsIp(const std::string& name) {
  std::error_code ec;
  asio::ip::make_address(name, ec);
  return !ec;
}

std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

// What OpenSSL's passphrase callback sees while one key is loaded.
struct PassphraseRequest {
  const Secret* passphrase = nullptr;
  bool asked = false;
};

// OpenSSL asks for the passphrase of an encrypted key: the Secret's bytes,
// or 0 (no passphrase: the load fails) — never a terminal prompt.
int PassphraseCallback(char* buf, int size, int /*rwflag*/, void* userdata) {
  auto* req = static_cast<PassphraseRequest*>(userdata);
  if (req == nullptr) return 0;
  req->asked = true;
  if (req->passphrase == nullptr || req->passphrase->empty() || size <= 0) return 0;
  const std::string& p = req->passphrase->reveal();
  if (p.size() > static_cast<size_t>(size)) return 0;
  std::memcpy(buf, p.data(), p.size());
  return static_cast<int>(p.size());
}

// "'client.key'" or "'key' of secure bundle 'db.zip'".
std::string Source(const std::string& file, bool in_memory, const char* entry, const TlsOptions& tls) {
  if (in_memory) return fmt::format("'{}' of {}", entry, tls.pem_origin.empty() ? "memory" : tls.pem_origin);
  return fmt::format("'{}'", file);
}

Status LoadTrust(const TlsOptions& tls, asio::ssl::context* ctx) {
  std::error_code ec;
  if (!tls.ca_pem.empty()) {
    ctx->add_certificate_authority(asio::buffer(tls.ca_pem), ec);
    if (ec) {
      return Status::TlsError(
          fmt::format("cannot load TLS CA {}: {}", Source("", true, "CA", tls), ec.message()));
    }
  } else if (!tls.ca_file.empty()) {
    ctx->load_verify_file(tls.ca_file, ec);
    if (ec) return Status::TlsError(fmt::format("cannot load TLS CA file '{}': {}", tls.ca_file, ec.message()));
  } else {
    ctx->set_default_verify_paths(ec);
    if (ec) return Status::TlsError(fmt::format("cannot load the system CA store: {}", ec.message()));
  }
  return Status::OK();
}

Status LoadClientIdentity(const TlsOptions& tls, asio::ssl::context* ctx) {
  std::error_code ec;
  const bool cert_mem = !tls.cert_pem.empty();
  if (cert_mem) {
    ctx->use_certificate_chain(asio::buffer(tls.cert_pem), ec);
  } else {
    ctx->use_certificate_chain_file(tls.cert_file, ec);
  }
  if (ec) {
    return Status::TlsError(fmt::format("cannot load TLS client certificate {}: {}",
                                        Source(tls.cert_file, cert_mem, "certificate", tls), ec.message()));
  }
  const bool key_mem = !tls.key_pem.empty();
  PassphraseRequest req{&tls.key_passphrase};
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_default_passwd_cb_userdata(native, &req);
  ERR_clear_error();
  if (key_mem) {
    ctx->use_private_key(asio::buffer(tls.key_pem.reveal()), asio::ssl::context::pem, ec);
  } else {
    ctx->use_private_key_file(tls.key_file, asio::ssl::context::pem, ec);
  }
  SSL_CTX_set_default_passwd_cb_userdata(native, nullptr);  // `req` dies here
  if (!ec) return Status::OK();
  const std::string key = Source(tls.key_file, key_mem, "key", tls);
  const std::string openssl = OpenSslErrors();
  if (req.asked && tls.key_passphrase.empty()) {
    return Status::TlsError(fmt::format(
        "TLS client key {} is encrypted and no passphrase was given (--tls-key-passphrase-file, "
        "tls_key_passphrase_file, CQLSTREAM_TLS_KEY_PASSPHRASE_FILE or CQLSTREAM_TLS_KEY_PASSPHRASE)",
        key));
  }
  if (req.asked) {
    return Status::TlsError(fmt::format(
        "cannot decrypt TLS client key {}: wrong passphrase, or the key is damaged ({})", key,
        openssl.empty() ? ec.message() : openssl));
  }
  return Status::TlsError(fmt::format("cannot load TLS client key {}: {}", key, openssl.empty() ? ec.message() : openssl));
}

// One connection attempt: resolve -> (bind) -> connect -> (TLS handshake).
class Connector final : public PendingConnect, public std::enable_shared_from_this<Connector> {
 public:
  Connector(asio::io_context& io, TransportOptions o, TransportCallback cb)
      : io_(io), opts_(std::move(o)), cb_(std::move(cb)), resolver_(io), timer_(io), socket_(io) {}

  void Start() {
    timer_.expires_after(opts_.connect_timeout);
    timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (ec) return;  // cancelled
      self->timed_out_ = true;
      self->Abort();
    });
    resolver_.async_resolve(opts_.host, std::to_string(opts_.port),
                            [self = shared_from_this()](std::error_code ec, tcp::resolver::results_type r) {
                              self->OnResolved(ec, std::move(r));
                            });
  }

  void Cancel(Status why) override {
    // resolver_, socket_ and tls_ are used on the I/O thread only.
    asio::post(io_, [self = shared_from_this(), why = std::move(why)]() mutable {
      if (self->done_ || self->cancelled_) return;
      self->cancelled_ = std::move(why);
      self->Abort();
    });
  }

 private:
  // Ends the operation under way (on the I/O thread): its handler runs with
  // an error and, seeing timed_out_ or cancelled_, finishes the attempt.
  void Abort() {
    std::error_code ignored;
    resolver_.cancel();
    socket_.close(ignored);
    if (tls_) tls_->next_layer().close(ignored);
  }

  std::string Where() const { return fmt::format("{}:{}", opts_.host, opts_.port); }

  void Finish(StatusOr<std::unique_ptr<Transport>> r) {
    if (done_) return;
    done_ = true;
    timer_.cancel();
    auto cb = std::move(cb_);
    cb(std::move(r));
  }

  void FailConnect(const std::string& what) {
    if (cancelled_) {
      Finish(*cancelled_);
    } else if (timed_out_) {
      Finish(Status::ConnectFailed(fmt::format("connect to {} timed out after {} ms", Where(),
                                               opts_.connect_timeout.count())));
    } else {
      Finish(Status::ConnectFailed(fmt::format("connect to {}: {}", Where(), what)));
    }
  }

  void OnResolved(std::error_code ec, tcp::resolver::results_type r) {
    if (cancelled_) return FailConnect("cancelled");
    if (ec) return FailConnect(fmt::format("cannot resolve host: {}", ec.message()));
    for (const auto& e : r) endpoints_.push_back(e.endpoint());
    if (endpoints_.empty()) return FailConnect("host resolves to no address");
    TryNext();
  }

  void TryNext() {
    if (next_ >= endpoints_.size()) return FailConnect(last_error_.empty() ? "no address" : last_error_);
    const tcp::endpoint ep = endpoints_[next_++];
    std::error_code ec;
    socket_ = tcp::socket(io_);
    socket_.open(ep.protocol(), ec);
    if (ec) {
      last_error_ = ec.message();
      return TryNext();
    }
    if (!opts_.source_ports.empty()) {
      bool bound = false;
      for (uint16_t p : opts_.source_ports) {
        socket_.bind(tcp::endpoint(ep.protocol(), p), ec);
        if (!ec) {
          bound = true;
          break;
        }
      }
      if (!bound) {
        last_error_ = fmt::format("none of the {} candidate source ports could be bound",
                                  opts_.source_ports.size());
        return TryNext();
      }
    }
    socket_.async_connect(ep, [self = shared_from_this()](std::error_code ec) { self->OnConnected(ec); });
  }

  void OnConnected(std::error_code ec) {
    if (timed_out_ || cancelled_) return FailConnect("timeout");  // (FailConnect names Cancel's status first)
    if (ec) {
      last_error_ = ec.message();
      return TryNext();
    }
    socket_.set_option(tcp::no_delay(true), ec);
    if (!opts_.tls) return Finish(std::unique_ptr<Transport>(new TcpTransport(std::move(socket_))));

    tls_ = std::make_unique<asio::ssl::stream<tcp::socket>>(std::move(socket_), *opts_.tls);
    SSL* ssl = tls_->native_handle();
    const std::string name = opts_.tls_server_name.empty() ? opts_.host : opts_.tls_server_name;
    if (!IsIp(name)) SSL_set_tlsext_host_name(ssl, name.c_str());  // SNI only for names
    if (opts_.tls_verify) {
      tls_->set_verify_mode(asio::ssl::verify_peer);
      // Let OpenSSL check the name so that a mismatch is reported precisely
      // ("hostname mismatch" / "IP address mismatch").
      const std::string check = opts_.tls_verify_name.value_or(name);
      X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
      // An empty `check` verifies the chain only (SNI routing without --tls-server-name).
      if (!check.empty() && IsIp(check)) {
        X509_VERIFY_PARAM_set1_ip_asc(param, check.c_str());
      } else if (!check.empty()) {
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        X509_VERIFY_PARAM_set1_host(param, check.c_str(), check.size());
      }
    } else {
      tls_->set_verify_mode(asio::ssl::verify_none);
    }
    tls_->async_handshake(asio::ssl::stream_base::client,
                          [self = shared_from_this()](std::error_code ec) { self->OnHandshake(ec); });
  }

  // The peer ended the stream (EOF, unclean TLS close, reset) without a TLS
  // alert: the server, or an SNI proxy that cannot route the server name,
  // went away. Not a TLS failure: another node may well answer.
  static bool PeerClosed(const std::error_code& ec) {
    return ec == asio::error::eof || ec == asio::ssl::error::stream_truncated ||
           ec == asio::error::connection_reset || ec == asio::error::connection_aborted ||
           ec == asio::error::broken_pipe;
  }

  void OnHandshake(std::error_code ec) {
    if (timed_out_ || cancelled_) return FailConnect("timeout during TLS handshake");
    if (ec) {
      std::string why = ec.message();
      long vr = SSL_get_verify_result(tls_->native_handle());
      const bool verify_failed = opts_.tls_verify && vr != X509_V_OK;
      if (verify_failed) {
        why = fmt::format("certificate verification failed: {}", X509_verify_cert_error_string(vr));
      } else if (PeerClosed(ec)) {
        ERR_clear_error();
        const std::string sni = opts_.tls_server_name.empty() || opts_.tls_server_name == opts_.host
                                    ? std::string()
                                    : fmt::format(" (server name {})", opts_.tls_server_name);
        return Finish(Status::ConnectionLost(fmt::format(
            "{}{} closed the connection during the TLS handshake: {}", Where(), sni, why)));
      }
      std::string more = OpenSslErrors();
      if (!more.empty()) why += " (" + more + ")";
      return Finish(Status::TlsError(fmt::format("TLS handshake with {} failed: {}", Where(), why)));
    }
    Finish(std::unique_ptr<Transport>(new TlsTransport(std::move(tls_))));
  }

  asio::io_context& io_;
  TransportOptions opts_;
  TransportCallback cb_;
  tcp::resolver resolver_;
  asio::steady_timer timer_;
  tcp::socket socket_;
  std::unique_ptr<asio::ssl::stream<tcp::socket>> tls_;
  std::vector<tcp::endpoint> endpoints_;
  size_t next_ = 0;
  std::string last_error_;
  bool timed_out_ = false;
  std::optional<Status> cancelled_;  // Cancel's status, once it has run
  bool done_ = false;
};

}  // namespace

StatusOr<std::shared_ptr<asio::ssl::context>> MakeTlsContext(const TlsOptions& tls) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  std::error_code ec;
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1,
                   ec);
  // The passphrase callback is always set: OpenSSL's default one would
  // prompt on the terminal (a hang in a training job) for an encrypted key.
  SSL_CTX_set_default_passwd_cb(ctx->native_handle(), &PassphraseCallback);
  if (!tls.insecure_skip_verify) CQLS_RETURN_IF_ERROR(LoadTrust(tls, ctx.get()));
  if (!tls.cert_file.empty() || !tls.cert_pem.empty()) CQLS_RETURN_IF_ERROR(LoadClientIdentity(tls, ctx.get()));
  return ctx;
}

std::shared_ptr<PendingConnect> ConnectTransport(asio::io_context& io, TransportOptions options,
                                                 TransportCallback callback) {
  auto c = std::make_shared<Connector>(io, std::move(options), std::move(callback));
  c->Start();
  return c;
}

}  // namespace cqlstream::net
