// Copyright (c) cqlstream authors.
#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "cqlstream/options.h"

namespace cqlstream {
namespace {

std::optional<std::string> Env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto b = item.find_first_not_of(" \t");
    auto e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
  }
  return out;
}

}  // namespace

Status ConnectionOptions::ApplyEnvironment() {
  if (auto v = Env("CQLSTREAM_HOSTS")) {
    hosts = SplitList(*v);
    if (hosts.empty()) return Status::InvalidArgument("CQLSTREAM_HOSTS names no host");
  }
  if (auto v = Env("CQLSTREAM_PORT")) {
    char* end = nullptr;
    long p = std::strtol(v->c_str(), &end, 10);
    if (end == v->c_str() || *end != '\0' || p <= 0 || p > 65535) {
      return Status::InvalidArgument(fmt::format("CQLSTREAM_PORT='{}' is not a TCP port", *v));
    }
    port = static_cast<uint16_t>(p);
  }
  if (auto v = Env("CQLSTREAM_KEYSPACE")) keyspace = *v;
  if (auto v = Env("CQLSTREAM_USERNAME")) username = *v;
  if (auto v = Env("CQLSTREAM_PASSWORD")) password = Secret(*v);
  if (auto v = Env("CQLSTREAM_PASSWORD_FILE")) CQLS_RETURN_IF_ERROR(LoadPasswordFile(*v));
  if (auto v = Env("CQLSTREAM_TLS_CA")) {
    if (!tls) tls.emplace();
    tls->ca_file = *v;
  }
  if (auto v = Env("CQLSTREAM_TLS_CERT")) {
    if (!tls) tls.emplace();
    tls->cert_file = *v;
  }
  if (auto v = Env("CQLSTREAM_TLS_KEY")) {
    if (!tls) tls.emplace();
    tls->key_file = *v;
  }
  if (auto v = Env("CQLSTREAM_LOCAL_DC")) local_dc = *v;
  return Status::OK();
}

Status ConnectionOptions::LoadPasswordFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::IOError(fmt::format("cannot read password file '{}'", path));
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.empty()) return Status::InvalidArgument(fmt::format("password file '{}' is empty", path));
  password = Secret(std::move(line));
  return Status::OK();
}

Status ConnectionOptions::Validate() const {
  if (hosts.empty()) return Status::InvalidArgument("no contact point: --hosts is empty");
  for (const auto& h : hosts) {
    if (h.empty()) return Status::InvalidArgument("empty host name in --hosts");
  }
  if (port == 0) return Status::InvalidArgument("--port 0 is not a TCP port");
  if (connections_per_host < 1 || connections_per_host > 64) {
    return Status::InvalidArgument(
        fmt::format("connections per host must be in 1..64, got {}", connections_per_host));
  }
  if (io_threads < 0 || io_threads > 64) {
    return Status::InvalidArgument(fmt::format("io threads must be in 0..64, got {}", io_threads));
  }
  if (!password.empty() && username.empty()) {
    return Status::InvalidArgument("a password was given without a username (--username)");
  }
  if (tls) {
    if (tls->key_file.empty() != tls->cert_file.empty()) {
      return Status::InvalidArgument("--tls-cert and --tls-key must be given together");
    }
  }
  if (max_frame_bytes < 1024 || max_frame_bytes > (256u << 20)) {
    return Status::InvalidArgument("max frame size must be between 1 KiB and 256 MiB");
  }
  return Status::OK();
}

std::string ConnectionOptions::Describe() const {
  std::string h;
  for (size_t i = 0; i < hosts.size(); ++i) h += (i ? "," : "") + hosts[i];
  return fmt::format("hosts={} port={} keyspace={} user={} password={} tls={}{} local_dc={}", h, port,
                     keyspace, username.empty() ? "-" : username,
                     password.empty() ? "-" : Secret::kRedacted, tls ? "on" : "off",
                     tls && tls->insecure_skip_verify ? " (VERIFICATION DISABLED)" : "",
                     local_dc.empty() ? "-" : local_dc);
}

}  // namespace cqlstream
