// Copyright (c) cqlstream authors.
#include "net/sni_endpoint.h"

namespace cqlstream::net {

std::string SniHostId(const Topology* topology, const std::string& address) {
  if (topology != nullptr) {
    for (const auto& h : topology->hosts) {
      if (h && h->address == address && !h->host_id.empty()) return h->host_id;
    }
  }
  return address;
}

void RouteThroughSniProxy(const SniProxy& proxy, const std::string& host_id, TransportOptions* t) {
  t->tls_verify_name = t->tls_server_name;
  t->tls_server_name = host_id;
  t->host = proxy.host;
  t->port = proxy.port;
}

}  // namespace cqlstream::net
