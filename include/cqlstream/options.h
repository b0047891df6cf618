// Copyright (c) cqlstream authors.
//
// ConnectionOptions: how cqlstream reaches a Cassandra / ScyllaDB cluster.
// Shared by every CLI subcommand (--hosts, --port, --keyspace, --username,
// --password-file, --tls-ca, --tls-cert, --tls-key, --local-dc) and the
// Python API; each can also come from an environment variable
// CQLSTREAM_<NAME> (CQLSTREAM_HOSTS, CQLSTREAM_PORT, ...).
//
// Secrets: the password is read from a file (--password-file /
// CQLSTREAM_PASSWORD_FILE) or from CQLSTREAM_PASSWORD, never from a command
// line flag, so it never shows in `ps`. It is kept in a Secret, whose
// rendering is always "<redacted>"; no log line or error message contains it.
//
// Thread-safety: value types.
#ifndef CQLSTREAM_OPTIONS_H_
#define CQLSTREAM_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cqlstream/status.h"

namespace cqlstream {

// A string that is never printed.
class Secret {
 public:
  Secret() = default;
  explicit Secret(std::string value) : value_(std::move(value)) {}
  const std::string& reveal() const { return value_; }
  bool empty() const { return value_.empty(); }
  static constexpr const char* kRedacted = "<redacted>";

 private:
  std::string value_;
};

struct TlsOptions {
  std::string ca_file;    // PEM CA bundle to verify the server; empty: the system store
  std::string cert_file;  // optional client certificate (PEM)
  std::string key_file;   // its private key (PEM)
  // Name checked against the server certificate; empty: the address the
  // client connects to (checked as an IP SAN or DNS name).
  std::string server_name;
  // Turns certificate and hostname verification off. Insecure: anyone on
  // the path can impersonate the server. Only for tests against throwaway
  // nodes; the CLI spells it --tls-insecure-skip-verify and warns loudly.
  bool insecure_skip_verify = false;
};

struct ConnectionOptions {
  std::vector<std::string> hosts = {"127.0.0.1"};  // contact points (IPs or names)
  uint16_t port = 9042;
  std::string keyspace = "cqlstream";
  std::string username;
  Secret password;
  std::optional<TlsOptions> tls;
  // Data center whose hosts are tried first; empty: the contact point's.
  std::string local_dc;

  // Connections per host (per shard on ScyllaDB). Requests are multiplexed
  // (up to 32,768 in flight on one connection), so few are needed.
  int connections_per_host = 2;
  int io_threads = 0;  // 0: min(4, hardware threads)
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds request_timeout{12000};
  uint32_t max_frame_bytes = 256u << 20;
  // Open one connection per ScyllaDB shard through its shard-aware port
  // when the server advertises one.
  bool shard_aware = true;
  // Reconnection backoff after a host went away (exponential, jittered).
  std::chrono::milliseconds reconnect_base{100};
  std::chrono::milliseconds reconnect_max{5000};

  // Fills fields from CQLSTREAM_* environment variables (only those that are
  // set): HOSTS, PORT, KEYSPACE, USERNAME, PASSWORD, PASSWORD_FILE, TLS_CA,
  // TLS_CERT, TLS_KEY, LOCAL_DC. Errors name the variable and the value.
  Status ApplyEnvironment();
  // Reads the password from a file (first line, trailing newline removed).
  Status LoadPasswordFile(const std::string& path);
  // Checks ranges and combinations (e.g. a key without a certificate).
  Status Validate() const;
  // One-line description for logs; the password is never included.
  std::string Describe() const;
};

}  // namespace cqlstream

#endif  // CQLSTREAM_OPTIONS_H_
