// Copyright (c) cqlstream authors.
#include "loader/option_kit.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "loader/coalesce.h"
#include "net/secure_bundle.h"

namespace cqlstream::loader {
namespace {

struct Checker {
  OptionSpelling spelling;

  std::string Name(std::string_view snake) const { return OptionName(snake, spelling); }

  // An integer option within [lo, hi].
  StatusOr<int> Int(std::string_view snake, int64_t v, int64_t lo, int64_t hi) const {
    if (v < lo || v > hi) {
      return Status::InvalidArgument(fmt::format("{} must be in [{}, {}], got {}", Name(snake), lo, hi, v));
    }
    return static_cast<int>(v);
  }

  // A duration in seconds: finite, positive, at most a day (the float to
  // integer conversion is only defined for such values).
  StatusOr<std::chrono::milliseconds> Seconds(std::string_view snake, double s) const {
    if (!std::isfinite(s) || s <= 0 || s > kMaxOptionSeconds) {
      return Status::InvalidArgument(fmt::format("{} must be a finite number of seconds in (0, {}], got {}",
                                                 Name(snake), kMaxOptionSeconds, s));
    }
    return std::chrono::milliseconds(std::max<int64_t>(1, std::llround(s * 1000.0)));
  }
};

// secure_bundle / CQLSTREAM_SECURE_BUNDLE, loaded (nullopt when neither).
StatusOr<std::optional<net::SecureBundle>> Bundle(const OptionArgs& a, const Checker& c) {
  std::optional<std::string> path = a.secure_bundle;
  if (!path) {
    const char* env = std::getenv("CQLSTREAM_SECURE_BUNDLE");
    if (env != nullptr && *env != '\0') path = env;
  }
  if (!path) return std::optional<net::SecureBundle>();
  if (path->empty()) return Status::InvalidArgument(fmt::format("{} is empty", c.Name("secure_bundle")));
  const bool given[] = {a.hosts.has_value(), a.port.has_value(), a.tls_ca.has_value(), a.tls_cert.has_value(),
                        a.tls_key.has_value()};
  const char* names[] = {"hosts", "port", "tls_ca", "tls_cert", "tls_key"};
  for (size_t i = 0; i < std::size(given); ++i) {
    if (given[i]) {
      return Status::InvalidArgument(fmt::format("{} cannot be combined with {}: the bundle gives the endpoint and "
                                                 "the TLS certificates",
                                                 c.Name("secure_bundle"), c.Name(names[i])));
    }
  }
  CQLS_ASSIGN_OR_RETURN(net::SecureBundle b, net::LoadSecureBundle(*path));
  return std::optional<net::SecureBundle>(std::move(b));
}

Status ApplyConnection(const OptionArgs& a, const Checker& c, const std::atomic<bool>* stop, ResolvedOptions* r) {
  ConnectionOptions& o = r->connection;
  CQLS_ASSIGN_OR_RETURN(std::optional<net::SecureBundle> bundle, Bundle(a, c));
  // The bundle's keyspace and data center sit below the variables and the
  // arguments; its endpoint and certificates replace the variables'.
  if (bundle && !bundle->keyspace.empty()) o.keyspace = bundle->keyspace;
  CQLS_RETURN_IF_ERROR(o.ApplyEnvironment());
  if (a.hosts) {
    std::vector<std::string> hosts;
    for (const auto& h : *a.hosts) {
      if (!h.empty()) hosts.push_back(h);
    }
    if (hosts.empty()) return Status::InvalidArgument(fmt::format("{} names no host", c.Name("hosts")));
    o.hosts = std::move(hosts);
  }
  if (a.port) {
    CQLS_ASSIGN_OR_RETURN(const int port, c.Int("port", *a.port, 1, 65535));
    o.port = static_cast<uint16_t>(port);
  }
  if (a.keyspace) o.keyspace = *a.keyspace;
  if (a.username) o.username = *a.username;
  if (a.password_file) CQLS_RETURN_IF_ERROR(o.LoadPasswordFile(*a.password_file, c.Name("password_file")));
  if (a.tls_ca || a.tls_cert || a.tls_key || a.tls_server_name || a.tls_insecure_skip_verify) {
    if (!o.tls) o.tls.emplace();
    if (a.tls_ca) o.tls->ca_file = *a.tls_ca;
    if (a.tls_cert) o.tls->cert_file = *a.tls_cert;
    if (a.tls_key) o.tls->key_file = *a.tls_key;
    if (a.tls_server_name) o.tls->server_name = *a.tls_server_name;
    o.tls->insecure_skip_verify = a.tls_insecure_skip_verify;
  }
  if (a.tls_key_passphrase_file) {
    CQLS_RETURN_IF_ERROR(o.LoadKeyPassphraseFile(*a.tls_key_passphrase_file, c.Name("tls_key_passphrase_file")));
  }
  if (a.local_dc) o.local_dc = *a.local_dc;
  if (a.connections_per_host) {
    CQLS_ASSIGN_OR_RETURN(o.connections_per_host, c.Int("connections_per_host", *a.connections_per_host, 1, 64));
  }
  if (a.max_shard_connections) {
    CQLS_ASSIGN_OR_RETURN(o.max_shard_connections,
                          c.Int("max_shard_connections", *a.max_shard_connections, 1, 65535));
  }
  if (a.io_threads) {
    CQLS_ASSIGN_OR_RETURN(o.io_threads, c.Int("io_threads", *a.io_threads, 0, 64));
  }
  if (a.connect_timeout_s) {
    CQLS_ASSIGN_OR_RETURN(o.connect_timeout, c.Seconds("connect_timeout", *a.connect_timeout_s));
  }
  if (bundle) {
    // A managed service's bundle: its metadata service names the SNI proxy and the nodes.
    CQLS_RETURN_IF_ERROR(net::FetchContactInfo(&*bundle, o.tls ? *o.tls : TlsOptions{}, o.connect_timeout, stop));
    CQLS_RETURN_IF_ERROR(net::ApplySecureBundle(*bundle, &o));
  }
  CQLS_RETURN_IF_ERROR(o.Validate());
  if (o.tls && o.tls->insecure_skip_verify) {
    r->warnings.push_back(InsecureTlsWarning(c.Name("tls_insecure_skip_verify")));
  }
  return Status::OK();
}

Status ApplyThrottles(const OptionArgs& a, const Checker& c, ResolvedOptions* r) {
  constexpr int64_t kI32 = 0x7fffffff;
  if (a.max_in_flight) {
    CQLS_ASSIGN_OR_RETURN(r->max_in_flight, c.Int("max_in_flight", *a.max_in_flight, 1, kI32));
  }
  if (a.initial_window) {
    CQLS_ASSIGN_OR_RETURN(r->initial_window, c.Int("initial_window", *a.initial_window, 1, kI32));
  }
  if (a.max_connections_per_host) {
    CQLS_ASSIGN_OR_RETURN(r->max_connections_per_host,
                          c.Int("max_connections_per_host", *a.max_connections_per_host, 1, 1024));
  }
  if (a.max_attempts) {
    CQLS_ASSIGN_OR_RETURN(r->max_attempts, c.Int("max_attempts", *a.max_attempts, 1, kI32));
  }
  if (a.request_timeout_s) {
    CQLS_ASSIGN_OR_RETURN(r->request_timeout, c.Seconds("request_timeout", *a.request_timeout_s));
  }
  if (a.retry_budget_s) {
    CQLS_ASSIGN_OR_RETURN(r->retry_budget, c.Seconds("retry_budget", *a.retry_budget_s));
  }
  if (a.coalesce) {
    CQLS_ASSIGN_OR_RETURN(r->coalesce, c.Int("coalesce", *a.coalesce, 0, kMaxCoalesce));
  }
  return Status::OK();
}

}  // namespace

std::string OptionName(std::string_view snake, OptionSpelling s) {
  if (s == OptionSpelling::kKeyword) return std::string(snake);
  std::string out = "--";
  for (const char ch : snake) out += ch == '_' ? '-' : ch;
  return out;
}

void ResolvedOptions::ApplyTo(LoaderOptions* o) const {
  o->connection = connection;
  if (max_in_flight != 0) o->max_in_flight = max_in_flight;
  if (initial_window != 0) o->initial_window = initial_window;
  if (max_connections_per_host != 0) o->max_connections_per_host = max_connections_per_host;
  if (max_attempts != 0) o->max_attempts = max_attempts;
  if (request_timeout.count() != 0) o->request_timeout = request_timeout;
  if (retry_budget.count() != 0) o->retry_budget = retry_budget;
  if (coalesce != 0) o->coalesce = coalesce;
}

StatusOr<ResolvedOptions> ResolveOptions(const OptionArgs& a, OptionSpelling spelling,
                                         const std::atomic<bool>* stop) {
  const Checker c{spelling};
  ResolvedOptions r;
  CQLS_RETURN_IF_ERROR(ApplyConnection(a, c, stop, &r));
  CQLS_RETURN_IF_ERROR(ApplyThrottles(a, c, &r));
  return r;
}

void PrintWarnings(const std::vector<std::string>& warnings) {
  for (const auto& w : warnings) std::fprintf(stderr, "cqlstream: WARNING: %s\n", w.c_str());
}

}  // namespace cqlstream::loader
