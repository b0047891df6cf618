// Copyright (c) cqlstream authors.
#include <fmt/format.h>

#include <cstdio>
#include <sstream>

#include "cli/cli.h"

namespace cqlstream::cli {

void ConnectionFlags::Add(CLI::App* app) {
  auto* g = app;
  g->add_option("--hosts", hosts_, "Contact points, comma-separated (env CQLSTREAM_HOSTS; default 127.0.0.1)");
  g->add_option("--port", port_, "CQL native port (env CQLSTREAM_PORT; default 9042)");
  g->add_option("--keyspace", keyspace_, "Keyspace holding the datasets (env CQLSTREAM_KEYSPACE; default cqlstream)");
  g->add_option("--username", username_, "User for PasswordAuthenticator (env CQLSTREAM_USERNAME)");
  g->add_option("--password-file", password_file_,
                "File whose first line is the password (env CQLSTREAM_PASSWORD_FILE or CQLSTREAM_PASSWORD)");
  g->add_option("--tls-ca", tls_ca_, "CA bundle (PEM) to verify the server; enables TLS (env CQLSTREAM_TLS_CA)");
  g->add_option("--tls-cert", tls_cert_, "Client certificate (PEM) for TLS (env CQLSTREAM_TLS_CERT)");
  g->add_option("--tls-key", tls_key_, "Client private key (PEM) for TLS (env CQLSTREAM_TLS_KEY)");
  g->add_flag("--tls-insecure-skip-verify", tls_insecure_,
              "INSECURE: use TLS without verifying the server certificate");
  g->add_option("--local-dc", local_dc_, "Data center whose hosts are tried first (env CQLSTREAM_LOCAL_DC)");
  g->add_option("--connections", connections_, "Connections per host (default 2)");
  g->add_option("--io-threads", io_threads_, "I/O threads (default: min(4, cores))");
  g->add_option("--timeout-ms", timeout_ms_, "Per-request timeout in milliseconds (default 12000)");
}

StatusOr<ConnectionOptions> ConnectionFlags::Resolve() const {
  ConnectionOptions o;
  CQLS_RETURN_IF_ERROR(o.ApplyEnvironment());
  if (!hosts_.empty()) {
    o.hosts.clear();
    std::stringstream ss(hosts_);
    std::string h;
    while (std::getline(ss, h, ',')) {
      if (!h.empty()) o.hosts.push_back(h);
    }
  }
  if (port_ != 0) {
    if (port_ < 1 || port_ > 65535) return Status::InvalidArgument(fmt::format("--port {} is not a TCP port", port_));
    o.port = static_cast<uint16_t>(port_);
  }
  if (!keyspace_.empty()) o.keyspace = keyspace_;
  if (!username_.empty()) o.username = username_;
  if (!password_file_.empty()) CQLS_RETURN_IF_ERROR(o.LoadPasswordFile(password_file_, "--password-file"));
  if (!tls_ca_.empty() || !tls_cert_.empty() || !tls_key_.empty() || tls_insecure_) {
    if (!o.tls) o.tls.emplace();
    if (!tls_ca_.empty()) o.tls->ca_file = tls_ca_;
    if (!tls_cert_.empty()) o.tls->cert_file = tls_cert_;
    if (!tls_key_.empty()) o.tls->key_file = tls_key_;
    o.tls->insecure_skip_verify = tls_insecure_;
  }
  if (!local_dc_.empty()) o.local_dc = local_dc_;
  if (connections_ != 0) o.connections_per_host = connections_;
  if (io_threads_ != 0) o.io_threads = io_threads_;
  if (timeout_ms_ != 0) {
    if (timeout_ms_ < 0) return Status::InvalidArgument("--timeout-ms must be positive");
    o.request_timeout = std::chrono::milliseconds(timeout_ms_);
  }
  CQLS_RETURN_IF_ERROR(o.Validate());
  if (o.tls && o.tls->insecure_skip_verify) {
    std::fprintf(stderr, "cqlstream: WARNING: %s\n", InsecureTlsWarning("--tls-insecure-skip-verify").c_str());
  }
  return o;
}

StatusOr<std::shared_ptr<net::Session>> ConnectionFlags::Connect(net::SessionOptions so) const {
  CQLS_ASSIGN_OR_RETURN(ConnectionOptions o, Resolve());
  auto s = net::Session::Connect(o, std::move(so));
  if (!s.ok()) return s.status().WithContext(fmt::format("cannot connect to {}", o.Describe()));
  return s;
}

int ReportError(const Status& s) {
  std::fprintf(stderr, "cqlstream: error: %s\n", s.ToString().c_str());
  return s.code() == Status::Code::kInvalidArgument ? 2 : 1;
}

}  // namespace cqlstream::cli
