// Copyright (c) cqlstream authors.
#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

void Wipe(std::string& s) noexcept {
  if (!s.empty()) OPENSSL_cleanse(s.data(), s.size());
  s.clear();
}

// Closes the descriptor and wipes the buffer whatever path the read takes.
struct PasswordRead {
  int fd = -1;
  std::array<char, kMaxPasswordFileBytes + 1> buf{};
  ~PasswordRead() {
    OPENSSL_cleanse(buf.data(), buf.size());
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Secret::Secret(std::string value) : value_(std::move(value)) {
  // The caller's string was moved from; nothing is left to wipe there.
}
Secret::Secret(const char* data, size_t size) : value_(data, size) {}
Secret::Secret(const Secret& other) : value_(other.value_) {}
Secret::Secret(Secret&& other) noexcept : value_(other.value_) { other.Clear(); }
Secret& Secret::operator=(const Secret& other) {
  if (this != &other) {
    Clear();
    value_ = other.value_;
  }
  return *this;
}
Secret& Secret::operator=(Secret&& other) noexcept {
  if (this != &other) {
    Clear();
    value_ = other.value_;
    other.Clear();
  }
  return *this;
}
Secret::~Secret() { Clear(); }
void Secret::Clear() noexcept { Wipe(value_); }

void ProtectProcessHoldingSecrets() {
#ifdef PR_SET_DUMPABLE
  (void)::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
#endif
}

std::string InsecureTlsWarning(std::string_view how) {
  return fmt::format("TLS certificate verification is DISABLED ({}); the server's identity is not checked", how);
}

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
  if (auto v = Env("CQLSTREAM_PASSWORD")) {
    password = Secret(std::move(*v));
    ProtectProcessHoldingSecrets();
  }
  if (auto v = Env("CQLSTREAM_PASSWORD_FILE")) CQLS_RETURN_IF_ERROR(LoadPasswordFile(*v, "CQLSTREAM_PASSWORD_FILE"));
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
  if (auto v = Env("CQLSTREAM_TLS_KEY_PASSPHRASE")) {
    if (!tls) tls.emplace();
    tls->key_passphrase = Secret(std::move(*v));
    ProtectProcessHoldingSecrets();
  }
  if (auto v = Env("CQLSTREAM_TLS_KEY_PASSPHRASE_FILE")) {
    CQLS_RETURN_IF_ERROR(LoadKeyPassphraseFile(*v, "CQLSTREAM_TLS_KEY_PASSPHRASE_FILE"));
  }
  if (auto v = Env("CQLSTREAM_LOCAL_DC")) local_dc = *v;
  return Status::OK();
}

StatusOr<Secret> ReadSecretFile(const std::string& path, std::string_view what, std::string_view origin) {
  // Never name `path` below: it may be the password pasted by mistake.
  PasswordRead r;
  // O_NONBLOCK: opening a FIFO with no writer must not hang; the type check
  // below refuses it anyway.
  r.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (r.fd < 0) {
    return Status::IOError(fmt::format("cannot open the {} given by {}: {} (its name is not printed: "
                                       "it could be the secret itself)",
                                       what, origin, std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(r.fd, &st) != 0) {
    return Status::IOError(fmt::format("cannot stat the {} given by {}: {}", what, origin, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(
        fmt::format("the {} given by {} is not a regular file ({})", what, origin,
                    S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket"));
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxPasswordFileBytes) {
    return Status::InvalidArgument(fmt::format("the {} given by {} holds {} bytes; at most {} are read",
                                               what, origin, st.st_size, kMaxPasswordFileBytes));
  }
  size_t n = 0;
  while (n < r.buf.size()) {
    const ssize_t got = ::read(r.fd, r.buf.data() + n, r.buf.size() - n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return Status::IOError(fmt::format("cannot read the {} given by {}: {}", what, origin, std::strerror(errno)));
    }
    if (got == 0) break;
    n += static_cast<size_t>(got);
  }
  if (n > kMaxPasswordFileBytes) {  // grew while being read
    return Status::InvalidArgument(
        fmt::format("the {} given by {} holds more than {} bytes", what, origin, kMaxPasswordFileBytes));
  }
  size_t len = 0;
  while (len < n && r.buf[len] != '\n') ++len;
  while (len > 0 && r.buf[len - 1] == '\r') --len;
  if (len == 0) return Status::InvalidArgument(fmt::format("the {} given by {} is empty", what, origin));
  if ((st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    std::fprintf(stderr,
                 "cqlstream: WARNING: the %.*s given by %.*s is readable by %s (mode %03o); "
                 "restrict it with chmod 600\n",
                 static_cast<int>(what.size()), what.data(), static_cast<int>(origin.size()), origin.data(),
                 (st.st_mode & S_IROTH) != 0 ? "every user" : "its group",
                 static_cast<unsigned>(st.st_mode & 0777));
  }
  Secret secret(r.buf.data(), len);
  ProtectProcessHoldingSecrets();
  return secret;
}

Status ConnectionOptions::LoadPasswordFile(const std::string& path, std::string_view origin) {
  CQLS_ASSIGN_OR_RETURN(password, ReadSecretFile(path, "password file", origin));
  return Status::OK();
}

Status ConnectionOptions::LoadKeyPassphraseFile(const std::string& path, std::string_view origin) {
  CQLS_ASSIGN_OR_RETURN(Secret passphrase, ReadSecretFile(path, "key passphrase file", origin));
  if (!tls) tls.emplace();
  tls->key_passphrase = std::move(passphrase);
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
  if (max_shard_connections < 1 || max_shard_connections > 65535) {
    return Status::InvalidArgument(
        fmt::format("max shard connections must be in 1..65535, got {}", max_shard_connections));
  }
  if (io_threads < 0 || io_threads > 64) {
    return Status::InvalidArgument(fmt::format("io threads must be in 0..64, got {}", io_threads));
  }
  if (!password.empty() && username.empty()) {
    return Status::InvalidArgument("a password was given without a username (--username)");
  }
  if (tls) {
    const bool has_cert = !tls->cert_file.empty() || !tls->cert_pem.empty();
    const bool has_key = !tls->key_file.empty() || !tls->key_pem.empty();
    if (has_key != has_cert) {
      return Status::InvalidArgument("--tls-cert and --tls-key must be given together");
    }
    if (!tls->key_passphrase.empty() && !has_key) {
      return Status::InvalidArgument("a TLS key passphrase was given without a client key (--tls-key)");
    }
  }
  if (sni_proxy) {
    if (!tls) return Status::InvalidArgument("an SNI proxy needs TLS (the host id travels as the TLS server name)");
    if (sni_proxy->host.empty() || sni_proxy->port == 0) {
      return Status::InvalidArgument("the SNI proxy address needs a host and a port");
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
  std::string out = fmt::format("hosts={} port={} keyspace={} user={} password={} tls={}{} local_dc={}", h, port,
                                keyspace, username.empty() ? "-" : username,
                                password.empty() ? "-" : Secret::kRedacted, tls ? "on" : "off",
                                tls && tls->insecure_skip_verify ? " (VERIFICATION DISABLED)" : "",
                                local_dc.empty() ? "-" : local_dc);
  if (tls && !tls->pem_origin.empty()) out += " tls_from=" + tls->pem_origin;
  if (sni_proxy) out += fmt::format(" sni_proxy={}:{}", sni_proxy->host, sni_proxy->port);
  return out;
}

}  // namespace cqlstream
