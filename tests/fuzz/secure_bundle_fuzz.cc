// Copyright (c) cqlstream authors.
//
// libFuzzer target for secure-connect bundles (net::ParseSecureBundle: the
// zip through libarchive, config.json through nlohmann/json, the PEM
// entries) and metadata-service answers (net::ParseContactInfo).
//
// Invariants checked (abort on violation): an error names the bundle; a
// bundle that parses has its three PEM entries, within the entry bound, and
// a route with what it needs (a host and port, or an SNI proxy with 1 ..
// kMaxBundleContactPoints host ids); ApplySecureBundle on it gives options
// that validate, or Internal for the metadata-service route (it needs
// FetchContactInfo, which the fuzzer does not run: no network).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "net/secure_bundle.h"

namespace {

using cqlstream::Status;
using cqlstream::net::SecureBundle;

void CheckBundle(const SecureBundle& b) {
  using cqlstream::net::kMaxBundleContactPoints;
  using cqlstream::net::kMaxSecureBundleEntryBytes;
  if (b.ca_pem.empty() || b.cert_pem.empty() || b.key_pem.empty()) std::abort();
  if (b.ca_pem.size() > kMaxSecureBundleEntryBytes || b.key_pem.reveal().size() > kMaxSecureBundleEntryBytes) {
    std::abort();
  }
  switch (b.route) {
    case SecureBundle::Route::kDirect:
      if (b.host.empty() || b.cql_port == 0) std::abort();
      break;
    case SecureBundle::Route::kMetadataService:
      if (b.host.empty() || b.metadata_port == 0) std::abort();
      break;
    case SecureBundle::Route::kSniProxy:
      if (b.sni_proxy.port == 0 || b.host_ids.empty() || b.host_ids.size() > kMaxBundleContactPoints) std::abort();
      break;
  }
  cqlstream::ConnectionOptions o;
  Status s = cqlstream::net::ApplySecureBundle(b, &o);
  if (b.route == SecureBundle::Route::kMetadataService) {
    if (s.code() != Status::Code::kInternal) std::abort();  // not fetched here
    return;
  }
  if (!s.ok()) std::abort();
  // A host id or host name may be empty-free but odd; Validate must not crash.
  (void)o.Validate();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto b = cqlstream::net::ParseSecureBundle(bytes, "fuzz.zip");
  if (!b.ok()) {
    if (b.status().message().find("fuzz.zip") == std::string::npos) std::abort();
  } else {
    CheckBundle(*b);
  }
  // The same bytes as a metadata-service answer.
  SecureBundle m;
  m.origin = "secure bundle 'fuzz.zip'";
  Status s = cqlstream::net::ParseContactInfo(bytes, &m);
  if (s.ok() && (m.host_ids.empty() || m.sni_proxy.port == 0)) std::abort();
  if (!s.ok() && s.message().find("fuzz.zip") == std::string::npos) std::abort();
  return 0;
}
