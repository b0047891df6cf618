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
// line flag, so it never shows in `ps`; so is the passphrase of an encrypted
// client key (--tls-key-passphrase-file / CQLSTREAM_TLS_KEY_PASSPHRASE_FILE
// or CQLSTREAM_TLS_KEY_PASSPHRASE). Both are kept in a Secret, whose
// rendering is always "<redacted>"; no log line or error message contains
// them.
//
// A cloud secure-connect bundle (--secure-bundle, net/secure_bundle.h) fills
// hosts, port, the TLS material (in memory: ca_pem, cert_pem, key_pem) and,
// for clusters behind an SNI proxy, sni_proxy.
//
// Thread-safety: value types.
#ifndef CQLSTREAM_OPTIONS_H_
#define CQLSTREAM_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cqlstream/status.h"

namespace cqlstream {

// A string that is never printed, and wiped when it is let go: the
// destructor, Clear(), assignment and moves overwrite the bytes it held
// (OPENSSL_cleanse, which the compiler may not elide) before releasing them.
// A moved-from Secret is empty. Copies are separate Secrets, each wiped on
// its own; reveal() hands out a reference, and whoever copies it into a
// std::string of its own owns that copy.
class Secret {
 public:
  Secret() = default;
  explicit Secret(std::string value);
  Secret(const char* data, size_t size);  // copies, leaving no temporary behind
  Secret(const Secret& other);
  Secret(Secret&& other) noexcept;
  Secret& operator=(const Secret& other);
  Secret& operator=(Secret&& other) noexcept;
  ~Secret();

  const std::string& reveal() const { return value_; }
  bool empty() const { return value_.empty(); }
  // Overwrites the held bytes with zeros, then empties the Secret (the
  // string keeps its capacity, so the zeroed buffer is what remains).
  void Clear() noexcept;
  static constexpr const char* kRedacted = "<redacted>";

 private:
  std::string value_;
};

// The most bytes a password file may hold (the first line is the password).
// The same bound holds for a key passphrase file.
inline constexpr size_t kMaxPasswordFileBytes = 4096;

// Reads a secret from a file: its first line, trailing CR/LF removed. The
// file must be a regular file of at most kMaxPasswordFileBytes (a FIFO, a
// device such as /dev/zero or a directory is refused without blocking); a
// file readable by group or others gets a warning on stderr. Errors never
// contain `path` (it may be the secret itself, pasted by mistake); `what`
// names the file's role ("password file") and `origin` the option that
// gave it ("--password-file"). Makes the process non-dumpable.
StatusOr<Secret> ReadSecretFile(const std::string& path, std::string_view what, std::string_view origin);

// Marks the process non-dumpable (prctl(PR_SET_DUMPABLE, 0)): no core file,
// no ptrace or /proc/<pid>/mem access by other processes of the same user.
// Called whenever a secret is loaded (password file, CQLSTREAM_PASSWORD).
// Idempotent; on systems without prctl it does nothing.
void ProtectProcessHoldingSecrets();

// The warning every front end (CLI, Python, DALI) gives when TLS
// verification is turned off; `how` names the option as that front end
// spells it ("--tls-insecure-skip-verify", "tls_insecure_skip_verify").
// Front ends print it as "cqlstream: WARNING: <text>" on stderr.
std::string InsecureTlsWarning(std::string_view how);

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
  // Passphrase of an encrypted key_file / key_pem (PKCS#8 or traditional
  // PEM encryption); empty: the key must not be encrypted. OpenSSL gets it
  // through a callback (never a terminal prompt).
  Secret key_passphrase;
  // The same material in memory (from a secure-connect bundle); each,
  // when set, is used instead of its file. `pem_origin` names where they
  // came from in messages ("secure bundle 'db.zip'").
  std::string ca_pem;
  std::string cert_pem;
  Secret key_pem;
  std::string pem_origin;
};

// Every connection goes to one TLS SNI proxy (managed Cassandra services);
// the proxy forwards it to the node whose host id is the TLS server name
// (SNI). Contact points (ConnectionOptions::hosts) are then host ids.
struct SniProxy {
  std::string host;
  uint16_t port = 0;
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
  // Set: connections go through this proxy (needs tls); see SniProxy.
  std::optional<SniProxy> sni_proxy;

  // Connections per host (on ScyllaDB at least one per shard: shard_aware).
  // Requests are multiplexed (up to 32,768 in flight on one connection), so
  // few are needed.
  int connections_per_host = 2;
  int io_threads = 0;  // 0: min(4, hardware threads)
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds request_timeout{12000};
  uint32_t max_frame_bytes = 256u << 20;
  // Open one connection per ScyllaDB shard through its shard-aware port
  // when the server advertises one (for at most max_shard_connections
  // shards, or the wanted number of connections when more).
  bool shard_aware = true;
  // The most shards of a node that get a connection of their own, whatever
  // shard count the node claims (its SUPPORTED answer may claim 65,535);
  // raise it for nodes of more shards, lower it to save descriptors.
  int max_shard_connections = 256;
  // Reconnection backoff after a host went away (exponential, jittered).
  std::chrono::milliseconds reconnect_base{100};
  std::chrono::milliseconds reconnect_max{5000};

  // Fills fields from CQLSTREAM_* environment variables (only those that are
  // set): HOSTS, PORT, KEYSPACE, USERNAME, PASSWORD, PASSWORD_FILE, TLS_CA,
  // TLS_CERT, TLS_KEY, TLS_KEY_PASSPHRASE, TLS_KEY_PASSPHRASE_FILE,
  // LOCAL_DC. Errors name the variable and the value (never a secret).
  Status ApplyEnvironment();
  // Reads the password from a file: its first line, trailing CR/LF removed.
  // The file must be a regular file of at most kMaxPasswordFileBytes (a
  // FIFO, a device such as /dev/zero or a directory is refused without
  // blocking); a file readable by group or others gets a warning on stderr.
  // Errors never contain `path`: a user who pasted the password itself as
  // the argument must not see it printed (or logged). `origin` names where
  // the path came from in messages ("--password-file", "password_file",
  // "CQLSTREAM_PASSWORD_FILE"). Makes the process non-dumpable
  // (ProtectProcessHoldingSecrets).
  Status LoadPasswordFile(const std::string& path, std::string_view origin = "--password-file");
  // Reads the passphrase of the TLS client key the same way (ReadSecretFile)
  // into tls->key_passphrase (TLS is turned on if it was not).
  Status LoadKeyPassphraseFile(const std::string& path, std::string_view origin = "--tls-key-passphrase-file");
  // Checks ranges and combinations (e.g. a key without a certificate).
  Status Validate() const;
  // One-line description for logs; the password is never included.
  std::string Describe() const;
};

}  // namespace cqlstream

#endif  // CQLSTREAM_OPTIONS_H_
