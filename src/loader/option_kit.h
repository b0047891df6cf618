// Copyright (c) cqlstream authors.
//
// The one resolver of connection and throttling options for every front
// end: the CLI's flags, Python's keyword arguments and the DALI operators'
// arguments all land in an OptionArgs (each field unset unless the user gave
// it), and ResolveOptions turns it into ConnectionOptions and the loader's
// throttles with one order of precedence (argument, then the CQLSTREAM_*
// environment variable, then the default), one set of checks and one set of
// messages. Messages name each option as the front end spells it
// (OptionSpelling: "--max-in-flight" for the CLI, "max_in_flight" for
// Python and DALI).
//
// Secrets never travel as values: the password comes from password_file /
// CQLSTREAM_PASSWORD_FILE / CQLSTREAM_PASSWORD, the passphrase of an
// encrypted client key from tls_key_passphrase_file /
// CQLSTREAM_TLS_KEY_PASSPHRASE_FILE / CQLSTREAM_TLS_KEY_PASSPHRASE
// (ConnectionOptions), and ResolveOptions never puts the name of such a
// file into an error (see ReadSecretFile).
//
// A secure-connect bundle (secure_bundle / CQLSTREAM_SECURE_BUNDLE,
// net/secure_bundle.h) supplies the endpoint and the TLS material: it
// cannot be combined with hosts, port, tls_ca, tls_cert or tls_key given as
// arguments (it overrides the CQLSTREAM_* variables of those); its keyspace
// and local data center are defaults below the arguments and variables.
//
// Warnings (e.g. TLS verification turned off) are returned, not printed:
// each front end shows them its own way, with the same text
// (PrintWarnings gives the CLI's "cqlstream: WARNING: ..." on stderr).
//
// Thread-safety: free functions on value types.
#ifndef CQLSTREAM_LOADER_OPTION_KIT_H_
#define CQLSTREAM_LOADER_OPTION_KIT_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cqlstream/loader.h"
#include "cqlstream/options.h"
#include "cqlstream/status.h"

namespace cqlstream::loader {

// How a front end spells option names: "--tls-ca" (kFlag) or "tls_ca" (kKeyword).
enum class OptionSpelling { kFlag, kKeyword };
// `snake` ("max_in_flight") as the front end spells it.
std::string OptionName(std::string_view snake, OptionSpelling s);

// Options as given; every unset field falls back to the environment, then
// to the default. Numbers are wide here so that a front end never narrows
// a user's value before it is checked.
struct OptionArgs {
  // Connection.
  std::optional<std::vector<std::string>> hosts;
  std::optional<int64_t> port;
  std::optional<std::string> keyspace;
  std::optional<std::string> username;
  std::optional<std::string> password_file;
  std::optional<std::string> tls_ca;
  std::optional<std::string> tls_cert;
  std::optional<std::string> tls_key;
  std::optional<std::string> tls_server_name;
  std::optional<std::string> tls_key_passphrase_file;
  bool tls_insecure_skip_verify = false;
  std::optional<std::string> secure_bundle;
  std::optional<std::string> local_dc;
  std::optional<int64_t> connections_per_host;
  // ScyllaDB: the most shards of a node that get a connection of their own
  // (ConnectionOptions::max_shard_connections, 1..65535).
  std::optional<int64_t> max_shard_connections;
  std::optional<int64_t> io_threads;
  std::optional<double> connect_timeout_s;
  // Loader throttles.
  std::optional<int64_t> max_in_flight;
  std::optional<int64_t> initial_window;
  std::optional<int64_t> max_connections_per_host;
  std::optional<int64_t> max_attempts;
  std::optional<double> request_timeout_s;
  std::optional<double> retry_budget_s;
  // Keys per coalesced read of small samples (LoaderOptions::coalesce): 0
  // automatic, 1 off, at most 100.
  std::optional<int64_t> coalesce;
};

// Every OptionArgs field in declaration order, named as the front ends
// spell it (a *_s field drops its unit: connect_timeout takes seconds):
// Python's Loader and DALI's operators take each as a keyword, the CLI's
// connection flags (ConnectionFlags) the connection options up to
// connect_timeout as --kebab-case. Tests compare the front ends with it.
inline constexpr std::string_view kOptionArgNames[] = {
    // Connection (the CLI's connection flags: --hosts ... --connect-timeout).
    "hosts", "port", "keyspace", "username", "password_file", "tls_ca", "tls_cert", "tls_key", "tls_server_name",
    "tls_key_passphrase_file", "tls_insecure_skip_verify", "secure_bundle", "local_dc", "connections_per_host",
    "max_shard_connections", "io_threads", "connect_timeout",
    // Loader throttles.
    "max_in_flight", "initial_window", "max_connections_per_host", "max_attempts", "request_timeout", "retry_budget",
    "coalesce"};

// The longest duration accepted, in seconds (one day).
inline constexpr double kMaxOptionSeconds = 86400.0;

struct ResolvedOptions {
  ConnectionOptions connection;
  // The loader's throttles; 0 where not given (the loader's automatic value).
  int max_in_flight = 0;
  int initial_window = 0;
  int max_connections_per_host = 0;
  int max_attempts = 0;
  std::chrono::milliseconds request_timeout{0};
  std::chrono::milliseconds retry_budget{0};
  int coalesce = 0;  // 0: automatic, as LoaderOptions::coalesce
  // For the user, in order (text without a "cqlstream: WARNING: " prefix).
  std::vector<std::string> warnings;

  // Copies connection and throttles into `o` (other fields untouched).
  void ApplyTo(LoaderOptions* o) const;
};

// Environment, then `a`; validated. Errors are InvalidArgument naming the
// option as `spelling` writes it, and the value (never a secret). `stop`
// (may be null; borrowed for the call): a secure bundle's metadata fetch
// gives up once it is set (Cancelled "interrupted").
StatusOr<ResolvedOptions> ResolveOptions(const OptionArgs& a, OptionSpelling spelling,
                                         const std::atomic<bool>* stop = nullptr);

// Prints each warning as "cqlstream: WARNING: <text>" on stderr.
void PrintWarnings(const std::vector<std::string>& warnings);

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_OPTION_KIT_H_
