// Copyright (c) cqlstream authors.
#include "net/secure_bundle.h"

#include "net/transport.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

namespace cqlstream::net {
namespace {

using nlohmann::json;

struct ArchiveCloser {
  void operator()(archive* a) const { archive_read_free(a); }
};

std::string ArchiveError(archive* a) {
  const char* e = archive_error_string(a);
  return e == nullptr ? "unknown error" : e;
}

// Entry name without a leading "./".
std::string Clean(std::string_view name) {
  while (name.substr(0, 2) == "./") name.remove_prefix(2);
  return std::string(name);
}

// Every regular entry of the zip, by name; bounded in count and size.
StatusOr<std::map<std::string, std::string>> ReadEntries(std::string_view zip, const std::string& origin) {
  std::unique_ptr<archive, ArchiveCloser> a(archive_read_new());
  if (!a) return Status::Internal("libarchive: out of memory");
  archive_read_support_format_zip(a.get());
  if (archive_read_open_memory(a.get(), zip.data(), zip.size()) != ARCHIVE_OK) {
    return Status::InvalidArgument(
        fmt::format("{} is not a zip file: {}", origin, ArchiveError(a.get())));
  }
  std::map<std::string, std::string> out;
  int entries = 0;
  for (;;) {
    archive_entry* e = nullptr;
    const int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      return Status::InvalidArgument(
          fmt::format("{}: damaged zip: {}", origin, ArchiveError(a.get())));
    }
    if (++entries > kMaxSecureBundleEntries) {
      return Status::InvalidArgument(
          fmt::format("{} has more than {} entries; not a secure-connect bundle", origin, kMaxSecureBundleEntries));
    }
    const char* raw = archive_entry_pathname(e);
    const std::string name = Clean(raw == nullptr ? "" : raw);
    if (archive_entry_filetype(e) != AE_IFREG || name.empty()) continue;
    if (archive_entry_size_is_set(e) && archive_entry_size(e) > static_cast<la_int64_t>(kMaxSecureBundleEntryBytes)) {
      return Status::InvalidArgument(fmt::format("{}: entry '{}' holds {} bytes; at most {} are read", origin, name,
                                                 archive_entry_size(e), kMaxSecureBundleEntryBytes));
    }
    std::string data;
    char buf[8192];
    for (;;) {
      const la_ssize_t n = archive_read_data(a.get(), buf, sizeof buf);
      if (n < 0) {
        return Status::InvalidArgument(fmt::format("{}: cannot read entry '{}': {}", origin, name,
                                                   ArchiveError(a.get())));
      }
      if (n == 0) break;
      if (data.size() + static_cast<size_t>(n) > kMaxSecureBundleEntryBytes) {
        return Status::InvalidArgument(
            fmt::format("{}: entry '{}' holds more than {} bytes", origin, name, kMaxSecureBundleEntryBytes));
      }
      data.append(buf, static_cast<size_t>(n));
    }
    if (!out.emplace(name, std::move(data)).second) {
      return Status::InvalidArgument(fmt::format("{}: entry '{}' appears twice", origin, name));
    }
  }
  return out;
}

// Parses JSON of at most kMaxBundleJsonDepth levels; no exception escapes.
StatusOr<json> ParseJson(std::string_view text, const std::string& what) {
  bool too_deep = false;
  json::parser_callback_t cb = [&too_deep](int depth, json::parse_event_t, json&) {
    if (depth > kMaxBundleJsonDepth) too_deep = true;
    return !too_deep;
  };
  json j = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/false);
  if (too_deep) return Status::InvalidArgument(fmt::format("{} nests deeper than {} levels", what, kMaxBundleJsonDepth));
  if (j.is_discarded()) return Status::InvalidArgument(fmt::format("{} is not valid JSON", what));
  if (!j.is_object()) return Status::InvalidArgument(fmt::format("{} is not a JSON object", what));
  return j;
}

// An optional string field.
StatusOr<std::optional<std::string>> Str(const json& j, const char* key, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return Status::InvalidArgument(fmt::format("{}: '{}' is not a string", what, key));
  return std::optional<std::string>(it->get<std::string>());
}

// A TCP port: a number or a string of digits, 1..65535.
StatusOr<uint16_t> PortValue(const json& v, std::string_view field, const std::string& what) {
  int64_t p = -1;
  if (v.is_number_integer()) {
    p = v.get<int64_t>();
  } else if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (!s.empty() && s.size() <= 5 && s.find_first_not_of("0123456789") == std::string::npos) p = std::stoll(s);
  }
  if (p < 1 || p > 65535) return Status::InvalidArgument(fmt::format("{}: '{}' is not a TCP port", what, field));
  return static_cast<uint16_t>(p);
}

StatusOr<std::optional<uint16_t>> Port(const json& j, const char* key, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<uint16_t>();
  CQLS_ASSIGN_OR_RETURN(uint16_t p, PortValue(*it, key, what));
  return std::optional<uint16_t>(p);
}

// "host:port" (a bracketed IPv6 address allowed: "[::1]:9042").
Status ParseAddress(const std::string& text, SniProxy* out, const std::string& what) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return Status::InvalidArgument(fmt::format("{}: sni_proxy_address '{}' is not host:port", what, text));
  }
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  CQLS_ASSIGN_OR_RETURN(out->port, PortValue(json(text.substr(colon + 1)), "sni_proxy_address", what));
  out->host = std::move(host);
  return Status::OK();
}

Status ContactInfoFrom(const json& ci, SecureBundle* b, const std::string& what) {
  if (!ci.is_object()) return Status::InvalidArgument(fmt::format("{}: contact_info is not an object", what));
  CQLS_ASSIGN_OR_RETURN(auto proxy, Str(ci, "sni_proxy_address", what + ": contact_info"));
  if (!proxy) return Status::InvalidArgument(fmt::format("{}: contact_info has no sni_proxy_address", what));
  CQLS_RETURN_IF_ERROR(ParseAddress(*proxy, &b->sni_proxy, what));
  auto cp = ci.find("contact_points");
  if (cp == ci.end() || !cp->is_array() || cp->empty()) {
    return Status::InvalidArgument(fmt::format("{}: contact_info.contact_points is not a list of host ids", what));
  }
  if (cp->size() > kMaxBundleContactPoints) {
    return Status::InvalidArgument(
        fmt::format("{}: contact_info lists {} contact points; at most {}", what, cp->size(), kMaxBundleContactPoints));
  }
  b->host_ids.clear();
  for (const auto& id : *cp) {
    if (!id.is_string() || id.get<std::string>().empty() || id.get<std::string>().size() > 255) {
      return Status::InvalidArgument(fmt::format("{}: contact_info.contact_points holds a non-host-id value", what));
    }
    b->host_ids.push_back(id.get<std::string>());
  }
  CQLS_ASSIGN_OR_RETURN(auto dc, Str(ci, "local_dc", what + ": contact_info"));
  if (dc) b->local_dc = *dc;
  b->route = SecureBundle::Route::kSniProxy;
  return Status::OK();
}

// config.json's routing fields (see the header for the precedence).
Status RouteFrom(const json& cfg, SecureBundle* b, const std::string& what) {
  if (auto ci = cfg.find("contact_info"); ci != cfg.end()) return ContactInfoFrom(*ci, b, what);
  CQLS_ASSIGN_OR_RETURN(auto host, Str(cfg, "host", what));
  CQLS_ASSIGN_OR_RETURN(auto port, Port(cfg, "port", what));
  CQLS_ASSIGN_OR_RETURN(auto cql_port, Port(cfg, "cql_port", what));
  if (!host || host->empty()) {
    return Status::InvalidArgument(fmt::format("{} names no endpoint (neither contact_info nor host)", what));
  }
  b->host = *host;
  if (port) {
    b->route = SecureBundle::Route::kMetadataService;
    b->metadata_port = *port;
  } else if (cql_port) {
    b->route = SecureBundle::Route::kDirect;
    b->cql_port = *cql_port;
  } else {
    return Status::InvalidArgument(fmt::format("{} gives host but neither port nor cql_port", what));
  }
  return Status::OK();
}

// The PEM entry that config.json's `key` names (default `fallback`).
StatusOr<std::string> Pem(const json& cfg, const char* key, const char* fallback,
                          std::map<std::string, std::string>& entries, const std::string& origin) {
  CQLS_ASSIGN_OR_RETURN(auto loc, Str(cfg, key, origin + ": config.json"));
  const std::string name = Clean(loc ? *loc : fallback);
  auto it = entries.find(name);
  if (it == entries.end()) return Status::InvalidArgument(fmt::format("{} has no entry '{}' ({})", origin, name, key));
  if (it->second.find("-----BEGIN ") == std::string::npos) {
    return Status::InvalidArgument(fmt::format("{}: entry '{}' is not PEM", origin, name));
  }
  std::string out = std::move(it->second);
  entries.erase(it);
  return out;
}

// The body of an HTTP/1.0 answer with status 200; errors name `url`.
StatusOr<std::string> HttpBody(const std::string& answer, const std::string& url) {
  const size_t eol = answer.find("\r\n");
  const std::string status = answer.substr(0, std::min<size_t>(eol, 200));
  if (eol == std::string::npos || status.rfind("HTTP/1.", 0) != 0 || status.size() < 12) {
    return Status::ProtocolError(fmt::format("{} did not answer HTTP", url));
  }
  if (status.compare(9, 3, "200") != 0) return Status::ProtocolError(fmt::format("{} answered '{}'", url, status));
  const size_t body = answer.find("\r\n\r\n");
  if (body == std::string::npos) return Status::ProtocolError(fmt::format("{}: the answer's headers do not end", url));
  return answer.substr(body + 4);
}

// The size of the whole answer (headers and body) when its headers are
// complete and give a Content-Length; nullopt while the headers are
// incomplete or when they give none (the body then ends with the stream).
StatusOr<std::optional<size_t>> AnswerSize(const std::string& answer) {
  const size_t end = answer.find("\r\n\r\n");
  if (end == std::string::npos) return std::optional<size_t>();
  size_t pos = answer.find("\r\n");
  while (pos < end) {
    const size_t next = answer.find("\r\n", pos + 2);
    const std::string line = answer.substr(pos + 2, next - pos - 2);
    pos = next;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name != "content-length") continue;
    const size_t v = line.find_first_not_of(" \t", colon + 1);
    const size_t v_end = line.find_last_not_of(" \t");
    uint64_t n = 0;
    const char* first = v == std::string::npos ? line.data() + line.size() : line.data() + v;
    const char* last = line.data() + (v_end == std::string::npos ? line.size() : v_end + 1);
    auto [ptr, err] = std::from_chars(first, last, n);
    if (err != std::errc() || ptr != last || first == last) {
      return Status::ProtocolError(fmt::format("the answer's Content-Length '{}' is not a number", line.substr(0, 80)));
    }
    if (n > kMaxSecureBundleEntryBytes) {
      return Status::ProtocolError(
          fmt::format("the answer's Content-Length {} is over the bound of {} bytes", n, kMaxSecureBundleEntryBytes));
    }
    return std::optional<size_t>(end + 4 + n);
  }
  return std::optional<size_t>();
}

// One HTTPS GET over a Transport, answer bounded; runs `io` until done or
// `timeout`. The answer ends after Content-Length body bytes (the server may
// keep the stream open), else with the end of the stream; any other read
// error, or a stream that ends before Content-Length, is ConnectionLost.
struct MetadataGet : std::enable_shared_from_this<MetadataGet> {
  std::unique_ptr<Transport> t;
  std::string request, answer;
  std::array<uint8_t, 8192> buf{};
  Status status = Status::OK();
  bool done = false;

  void Write() {
    auto self = shared_from_this();
    t->AsyncWrite({asio::buffer(request)}, [self](std::error_code ec, size_t) {
      if (ec) return self->Finish(Status::ConnectionLost("sending the request: " + ec.message()));
      self->Read();
    });
  }
  void Read() {
    auto self = shared_from_this();
    t->AsyncReadSome(buf, [self](std::error_code ec, size_t n) { self->OnRead(ec, n); });
  }
  void OnRead(std::error_code ec, size_t n) {
    answer.append(reinterpret_cast<const char*>(buf.data()), n);
    if (answer.size() > kMaxSecureBundleEntryBytes) {
      return Finish(
          Status::ProtocolError(fmt::format("the answer is longer than {} bytes", kMaxSecureBundleEntryBytes)));
    }
    auto size = AnswerSize(answer);
    if (!size.ok()) return Finish(size.status());
    if (*size && answer.size() >= **size) {
      answer.resize(**size);
      return Finish(Status::OK());
    }
    if (!ec) return Read();
    const bool end_of_stream = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
    if (!end_of_stream) return Finish(Status::ConnectionLost("reading the answer: " + ec.message()));
    if (*size) {
      return Finish(Status::ConnectionLost(
          fmt::format("the answer ended after {} of {} bytes (Content-Length)", answer.size(), **size)));
    }
    Finish(Status::OK());  // no Content-Length: the body ends with the stream (HTTP/1.0)
  }
  void Finish(Status s) {
    if (done) return;
    done = true;
    status = std::move(s);
    t->Close();
  }
};

}  // namespace

StatusOr<SecureBundle> ParseSecureBundle(std::string_view zip, std::string_view name) {
  SecureBundle b;
  b.origin = fmt::format("secure bundle '{}'", name);
  if (zip.size() > kMaxSecureBundleBytes) {
    return Status::InvalidArgument(
        fmt::format("{} holds {} bytes; at most {} are read", b.origin, zip.size(), kMaxSecureBundleBytes));
  }
  CQLS_ASSIGN_OR_RETURN(auto entries, ReadEntries(zip, b.origin));
  auto cfg_it = entries.find("config.json");
  if (cfg_it == entries.end()) return Status::InvalidArgument(fmt::format("{} has no config.json", b.origin));
  const std::string what = b.origin + ": config.json";
  CQLS_ASSIGN_OR_RETURN(json cfg, ParseJson(cfg_it->second, what));
  CQLS_ASSIGN_OR_RETURN(auto keyspace, Str(cfg, "keyspace", what));
  if (keyspace) b.keyspace = *keyspace;
  CQLS_ASSIGN_OR_RETURN(auto dc, Str(cfg, "localDC", what));
  if (dc) b.local_dc = *dc;
  CQLS_RETURN_IF_ERROR(RouteFrom(cfg, &b, what));
  CQLS_ASSIGN_OR_RETURN(b.ca_pem, Pem(cfg, "caCertLocation", "ca.crt", entries, b.origin));
  CQLS_ASSIGN_OR_RETURN(b.cert_pem, Pem(cfg, "certLocation", "cert", entries, b.origin));
  CQLS_ASSIGN_OR_RETURN(std::string key, Pem(cfg, "keyLocation", "key", entries, b.origin));
  b.key_pem = Secret(std::move(key));
  return b;
}

StatusOr<SecureBundle> LoadSecureBundle(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return Status::IOError(fmt::format("cannot open secure bundle '{}': {}", path, std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(fmt::format("secure bundle '{}' is not a regular file", path));
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxSecureBundleBytes) {
    return Status::InvalidArgument(fmt::format("secure bundle '{}' holds {} bytes; at most {} are read", path,
                                               st.st_size, kMaxSecureBundleBytes));
  }
  std::string data(kMaxSecureBundleBytes + 1, '\0');
  size_t n = 0;
  while (n < data.size()) {
    const ssize_t got = ::read(fd, data.data() + n, data.size() - n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Status::IOError(fmt::format("cannot read secure bundle '{}': {}", path, std::strerror(errno)));
    if (got == 0) break;
    n += static_cast<size_t>(got);
  }
  data.resize(n);  // over the bound if it grew while read: ParseSecureBundle refuses it
  return ParseSecureBundle(data, path);
}

Status FetchContactInfo(SecureBundle* b, const TlsOptions& tls_base, std::chrono::milliseconds timeout,
                        const std::atomic<bool>* stop) {
  if (b->route != SecureBundle::Route::kMetadataService) return Status::OK();
  const std::string url = fmt::format("https://{}:{}/metadata", b->host, b->metadata_port);
  TlsOptions tls;
  tls.insecure_skip_verify = tls_base.insecure_skip_verify;
  tls.key_passphrase = tls_base.key_passphrase;
  tls.ca_pem = b->ca_pem;
  tls.cert_pem = b->cert_pem;
  tls.key_pem = b->key_pem;
  tls.pem_origin = b->origin;
  CQLS_ASSIGN_OR_RETURN(auto ctx, MakeTlsContext(tls));
  asio::io_context io;
  TransportOptions to;
  to.host = b->host;
  to.port = b->metadata_port;
  to.connect_timeout = timeout;
  to.tls = ctx;
  to.tls_verify = !tls.insecure_skip_verify;
  auto get = std::make_shared<MetadataGet>();
  struct Release {  // the transport goes before the io_context it lives on
    std::shared_ptr<MetadataGet> get;
    ~Release() { get->t.reset(); }
  } release{get};
  get->request = fmt::format(
      "GET /metadata HTTP/1.0\r\nHost: {}:{}\r\nAccept: application/json\r\nConnection: close\r\n\r\n", b->host,
      b->metadata_port);
  std::shared_ptr<PendingConnect> pending = ConnectTransport(io, to, [get](StatusOr<std::unique_ptr<Transport>> t) {
    if (!t.ok()) {
      get->done = true;
      get->status = t.status();
      return;
    }
    get->t = std::move(t).value();
    get->Write();
  });
  // Run the fetch here, looking at the stop every kStopPoll.
  constexpr std::chrono::milliseconds kStopPoll{50};
  const auto deadline = std::chrono::steady_clock::now() + timeout + std::chrono::milliseconds(100);
  bool interrupted = false;
  while (!get->done) {
    if (stop != nullptr && stop->load()) {
      interrupted = true;
      break;
    }
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) break;
    io.run_for(std::min<std::chrono::steady_clock::duration>(left, kStopPoll));
    if (io.stopped()) break;  // out of work (not expected while not done): nothing more will come
  }
  if (!get->done) {
    pending->Cancel(Status::Cancelled("interrupted"));  // a connect or TLS handshake under way
    if (get->t) get->t->Close();
    io.restart();
    io.run_for(std::chrono::milliseconds(100));  // let the closed operations finish
    if (interrupted) return Status::Cancelled("interrupted");
    return Status::Timeout(fmt::format("{}: no answer from the metadata service {} within {} ms", b->origin, url,
                                       timeout.count()));
  }
  if (!get->status.ok()) return get->status.WithContext(fmt::format("{}: metadata service {}", b->origin, url));
  CQLS_ASSIGN_OR_RETURN(std::string body, HttpBody(get->answer, url));
  return ParseContactInfo(body, b);
}

Status ParseContactInfo(std::string_view text, SecureBundle* b) {
  const std::string what = b->origin + ": metadata service answer";
  CQLS_ASSIGN_OR_RETURN(json j, ParseJson(text, what));
  auto ci = j.find("contact_info");
  if (ci == j.end()) return Status::InvalidArgument(fmt::format("{} has no contact_info", what));
  return ContactInfoFrom(*ci, b, what);
}

Status ApplySecureBundle(const SecureBundle& b, ConnectionOptions* o) {
  switch (b.route) {
    case SecureBundle::Route::kMetadataService:
      return Status::Internal(fmt::format("{}: the metadata service was not asked (FetchContactInfo)", b.origin));
    case SecureBundle::Route::kDirect:
      o->hosts = {b.host};
      o->port = b.cql_port;
      o->sni_proxy.reset();
      break;
    case SecureBundle::Route::kSniProxy:
      o->hosts = b.host_ids;
      o->sni_proxy = b.sni_proxy;
      o->port = b.sni_proxy.port;
      break;
  }
  TlsOptions tls;
  if (o->tls) {
    tls.server_name = o->tls->server_name;
    tls.insecure_skip_verify = o->tls->insecure_skip_verify;
    tls.key_passphrase = o->tls->key_passphrase;
  }
  tls.ca_pem = b.ca_pem;
  tls.cert_pem = b.cert_pem;
  tls.key_pem = b.key_pem;
  tls.pem_origin = b.origin;
  o->tls = std::move(tls);
  if (o->local_dc.empty()) o->local_dc = b.local_dc;
  return Status::OK();
}

}  // namespace cqlstream::net
