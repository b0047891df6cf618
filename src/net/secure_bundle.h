// Copyright (c) cqlstream authors.
//
// SecureBundle: a cloud secure-connect bundle, the zip that managed Cassandra
// services hand out (--secure-bundle / secure_bundle=). It holds
//   config.json   where to connect, the keyspace, the local data center
//   ca.crt        the CA that signed the nodes' (and the proxy's) certificates
//   cert, key     the client certificate and its (unencrypted) key, PEM
// The entry names of the three PEM files may be given in config.json
// (caCertLocation, certLocation, keyLocation; a leading "./" is ignored).
//
// config.json fields read (everything else is ignored):
//   host, port        the HTTPS metadata service (https://host:port/metadata)
//                     that managed services answer with contact_info
//                     (FetchContactInfo asks it)
//   cql_port          with host and no port: a direct endpoint, host:cql_port
//   contact_info      the metadata service's answer inline: {sni_proxy_address
//                     "host:port", contact_points [host ids], local_dc}
//   keyspace, localDC defaults for the keyspace and the local data center
// Precedence: contact_info, else host+port (metadata service), else
// host+cql_port (direct). docs/security.md describes the routing.
//
// The bundle is outside input: the zip is at most kMaxSecureBundleBytes,
// each entry read at most kMaxSecureBundleEntryBytes, config.json nests at
// most kMaxBundleJsonDepth deep; every problem is an InvalidArgument naming
// the bundle and the entry or field, never a crash or unbounded memory.
//
// Thread-safety: value types and free functions.
#ifndef CQLSTREAM_NET_SECURE_BUNDLE_H_
#define CQLSTREAM_NET_SECURE_BUNDLE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cqlstream/options.h"
#include "cqlstream/status.h"

namespace cqlstream::net {

inline constexpr size_t kMaxSecureBundleBytes = 1u << 20;
inline constexpr size_t kMaxSecureBundleEntryBytes = 64u << 10;
inline constexpr int kMaxSecureBundleEntries = 64;
inline constexpr int kMaxBundleJsonDepth = 8;
inline constexpr size_t kMaxBundleContactPoints = 256;

struct SecureBundle {
  enum class Route { kDirect, kSniProxy, kMetadataService };

  std::string origin;  // "secure bundle 'db.zip'", for messages
  std::string ca_pem;
  std::string cert_pem;
  Secret key_pem;
  std::string keyspace;  // empty when config.json has none
  std::string local_dc;  // localDC, or contact_info.local_dc

  Route route = Route::kDirect;
  std::string host;            // kDirect and kMetadataService
  uint16_t cql_port = 0;       // kDirect
  uint16_t metadata_port = 0;  // kMetadataService
  SniProxy sni_proxy;          // kSniProxy
  std::vector<std::string> host_ids;  // kSniProxy: the contact points
};

// Parses the bytes of a bundle; `name` is how messages name it.
StatusOr<SecureBundle> ParseSecureBundle(std::string_view zip, std::string_view name);

// Reads the file (a regular file of at most kMaxSecureBundleBytes) and
// parses it.
StatusOr<SecureBundle> LoadSecureBundle(const std::string& path);

// Parses a metadata service's answer, a JSON object whose contact_info is
// {"sni_proxy_address": "h:p", "contact_points": [host ids], "local_dc": ".."},
// into `b` (route kSniProxy).
Status ParseContactInfo(std::string_view json, SecureBundle* b);

// Asks the bundle's metadata service (route kMetadataService) for the
// cluster's contact_info: GET https://host:port/metadata over TLS with the
// bundle's CA and client certificate (the host name verified unless
// tls.insecure_skip_verify; tls.key_passphrase for an encrypted key), the
// answer at most kMaxSecureBundleEntryBytes, within `timeout`; on success
// the route becomes kSniProxy. Other routes: nothing to do. The request
// says Connection: close; the answer ends after its Content-Length (bounded
// like the answer) even when the server keeps the stream open, else with
// the end of the stream. A reset or other read error, or a stream that ends
// before Content-Length, is ConnectionLost; no answer in time is Timeout.
// `stop` (may be null; borrowed for the call): once it is set, the fetch
// gives up within about 150 ms (a 50 ms poll, then 100 ms for the closed
// operations to end; Cancelled "interrupted"). A name lookup under way is
// not cut short (net/transport.h).
Status FetchContactInfo(SecureBundle* b, const TlsOptions& tls, std::chrono::milliseconds timeout,
                        const std::atomic<bool>* stop = nullptr);

// Points `o` at the bundle's cluster: hosts and port (direct) or sni_proxy
// and hosts = host ids (SNI); TLS from the bundle's PEMs (server_name,
// insecure_skip_verify and key_passphrase of an existing o->tls are kept);
// local_dc from the bundle when `o` has none. A kMetadataService route must
// be fetched first (FetchContactInfo): Internal otherwise.
Status ApplySecureBundle(const SecureBundle& b, ConnectionOptions* o);

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_SECURE_BUNDLE_H_
