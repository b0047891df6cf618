// Copyright (c) cqlstream authors.
#include <fmt/format.h>

#include <cstdio>
#include <sstream>

#include "cli/cli.h"
#include "loader/option_kit.h"
#include "store/catalog.h"
#include "util/escape.h"

namespace cqlstream::cli {

void ConnectionFlags::Add(CLI::App* app) {
  auto* g = app;
  g->add_option("--hosts", hosts_, "Contact points, comma-separated (env CQLSTREAM_HOSTS; default 127.0.0.1)");
  g->add_option("--port", port_, "CQL native port (env CQLSTREAM_PORT; default 9042)")
      ->check(CLI::Number);
  g->add_option("--keyspace", keyspace_, "Keyspace holding the datasets (env CQLSTREAM_KEYSPACE; default cqlstream)");
  g->add_option("--username", username_, "User for PasswordAuthenticator (env CQLSTREAM_USERNAME)");
  g->add_option("--password-file", password_file_,
                "File whose first line is the password (env CQLSTREAM_PASSWORD_FILE or CQLSTREAM_PASSWORD)");
  g->add_option("--tls-ca", tls_ca_, "CA bundle (PEM) to verify the server; enables TLS (env CQLSTREAM_TLS_CA)");
  g->add_option("--tls-cert", tls_cert_, "Client certificate (PEM) for TLS (env CQLSTREAM_TLS_CERT)");
  g->add_option("--tls-key", tls_key_, "Client private key (PEM) for TLS (env CQLSTREAM_TLS_KEY)");
  g->add_option("--tls-server-name", tls_server_name_,
                "Name checked against the server certificate (default: the address connected to)");
  g->add_option("--tls-key-passphrase-file", tls_key_passphrase_file_,
                "File whose first line is the passphrase of an encrypted --tls-key (env "
                "CQLSTREAM_TLS_KEY_PASSPHRASE_FILE or CQLSTREAM_TLS_KEY_PASSPHRASE)");
  g->add_flag("--tls-insecure-skip-verify", tls_insecure_,
              "INSECURE: use TLS without verifying the server certificate");
  g->add_option("--secure-bundle", secure_bundle_,
                "Cloud secure-connect bundle (zip): endpoint, CA, client certificate and key; replaces --hosts, "
                "--port and --tls-ca/-cert/-key (env CQLSTREAM_SECURE_BUNDLE; docs/security.md)");
  g->add_option("--local-dc", local_dc_, "Data center whose hosts are tried first (env CQLSTREAM_LOCAL_DC)");
  g->add_option("--connections,--connections-per-host", connections_, "Connections per host (1..64; default 2)")
      ->check(CLI::Number);
  g->add_option("--max-shard-connections", max_shard_connections_,
                "ScyllaDB: the most shards of a node that get a connection of their own (1..65535; default 256)")
      ->check(CLI::Number);
  g->add_option("--io-threads", io_threads_, "I/O threads (0..64; default: min(4, cores))")
      ->check(CLI::Number);
  g->add_option("--connect-timeout", connect_timeout_s_, "Seconds to open a connection (default 5)")
      ->check(CLI::Number);
  g->add_option("--timeout-ms", timeout_ms_, "Per-request timeout in milliseconds (default 12000)")
      ->check(CLI::Number);
}

StatusOr<ConnectionOptions> ConnectionFlags::Resolve(const std::atomic<bool>* interrupt) const {
  // One resolver for the CLI, Python and DALI (loader/option_kit.h): the
  // flags given, then CQLSTREAM_* variables, then the defaults.
  loader::OptionArgs a;
  if (!hosts_.empty()) {
    a.hosts.emplace();
    std::stringstream ss(hosts_);
    std::string h;
    while (std::getline(ss, h, ',')) a.hosts->push_back(h);
  }
  a.port = port_;
  if (!keyspace_.empty()) a.keyspace = keyspace_;
  if (!username_.empty()) a.username = username_;
  if (!password_file_.empty()) a.password_file = password_file_;
  if (!tls_ca_.empty()) a.tls_ca = tls_ca_;
  if (!tls_cert_.empty()) a.tls_cert = tls_cert_;
  if (!tls_key_.empty()) a.tls_key = tls_key_;
  if (!tls_server_name_.empty()) a.tls_server_name = tls_server_name_;
  if (!tls_key_passphrase_file_.empty()) a.tls_key_passphrase_file = tls_key_passphrase_file_;
  a.tls_insecure_skip_verify = tls_insecure_;
  if (!secure_bundle_.empty()) a.secure_bundle = secure_bundle_;
  if (!local_dc_.empty()) a.local_dc = local_dc_;
  a.connections_per_host = connections_;
  a.max_shard_connections = max_shard_connections_;
  a.io_threads = io_threads_;
  a.connect_timeout_s = connect_timeout_s_;
  CQLS_ASSIGN_OR_RETURN(loader::ResolvedOptions r, loader::ResolveOptions(a, loader::OptionSpelling::kFlag, interrupt));
  ConnectionOptions o = std::move(r.connection);
  if (timeout_ms_) {
    constexpr int64_t kMostMs = static_cast<int64_t>(loader::kMaxOptionSeconds * 1000);
    if (*timeout_ms_ < 1 || *timeout_ms_ > kMostMs) {
      return Status::InvalidArgument(fmt::format("--timeout-ms must be in [1, {}], got {}", kMostMs, *timeout_ms_));
    }
    o.request_timeout = std::chrono::milliseconds(*timeout_ms_);
  }
  loader::PrintWarnings(r.warnings);
  return o;
}

namespace {

// The interrupt flag lives as long as the process: shared without an owner.
std::shared_ptr<const std::atomic<bool>> Unowned(const std::atomic<bool>* interrupt) {
  return std::shared_ptr<const std::atomic<bool>>(std::shared_ptr<void>(), interrupt);
}

}  // namespace

StatusOr<std::shared_ptr<net::Session>> ConnectionFlags::Connect(net::SessionOptions so,
                                                                 const std::atomic<bool>* interrupt) const {
  CQLS_ASSIGN_OR_RETURN(ConnectionOptions o, Resolve(interrupt));
  return ConnectTo(o, std::move(so), interrupt);
}

StatusOr<std::shared_ptr<net::Session>> ConnectionFlags::ConnectTo(const ConnectionOptions& o,
                                                                   net::SessionOptions so,
                                                                   const std::atomic<bool>* interrupt) {
  if (interrupt != nullptr) so.stop = Unowned(interrupt);
  auto s = net::Session::Connect(o, std::move(so));
  if (!s.ok()) return s.status().WithContext(fmt::format("cannot connect to {}", o.Describe()));
  if (interrupt != nullptr) (*s)->SetStop(nullptr);  // what follows looks at the flag where it can stop cleanly
  return s;
}

int ReportError(const Status& s) {
  // Messages carry paths and server text: escaped for the terminal.
  std::fprintf(stderr, "cqlstream: error: %s\n", PrintableText(s.ToString()).c_str());
  return s.code() == Status::Code::kInvalidArgument ? 2 : 1;
}

int ReportErrorOrInterrupt(const Status& st, const std::atomic<bool>* stop, std::string_view interrupted) {
  if (st.code() != Status::Code::kCancelled || stop == nullptr || !stop->load()) return ReportError(st);
  std::fprintf(stderr, "cqlstream: %.*s\n", static_cast<int>(interrupted.size()), interrupted.data());
  return 130;
}

StatusOr<ConnectionFlags::OpenedDataset> ConnectionFlags::OpenDataset(const std::string& name,
                                                                      const std::atomic<bool>* interrupt) const {
  net::SessionOptions so;
  so.watch_events = false;
  OpenedDataset out;
  CQLS_ASSIGN_OR_RETURN(out.session, Connect(so, interrupt));
  if (interrupt != nullptr) out.session->SetStop(Unowned(interrupt));  // for the catalog read
  auto d = store::LoadDataset(*out.session, out.session->options().keyspace, name);
  if (interrupt != nullptr) out.session->SetStop(nullptr);
  if (!d.ok()) {
    out.session->Close();
    return d.status();
  }
  out.dataset = std::move(*d);
  return out;
}

}  // namespace cqlstream::cli
