// Copyright (c) cqlstream authors.
//
// Routing through a TLS SNI proxy, as managed Cassandra services expose their
// nodes (see SniProxy in cqlstream/options.h and docs/security.md): every
// connection goes to the one proxy address and names the node it is meant
// for by its host id as the TLS server name (SNI); the proxy reads the name
// from the ClientHello and forwards the raw stream to that node.
//
// The session applies it where it builds a connection's options
// (Session::Impl::ConnectionOptionsFor): contact points are host ids already;
// hosts learned from system.local / system.peers are known by address, and
// SniHostId finds their host id in the topology.
//
// Thread-safety: free functions; `topology` must not change during the call
// (the session's snapshots are immutable).
#ifndef CQLSTREAM_NET_SNI_ENDPOINT_H_
#define CQLSTREAM_NET_SNI_ENDPOINT_H_

#include <string>

#include "cqlstream/options.h"
#include "net/topology.h"
#include "net/transport.h"

namespace cqlstream::net {

// The host id of the topology host whose address is `address`; `address`
// itself when none has one (contact points of an SNI bundle are host ids).
std::string SniHostId(const Topology* topology, const std::string& address);

// Points `t` at the proxy and sends `host_id` as the TLS server name. The
// certificate is still verified against the CA; the name checked in it is
// the one t->tls_server_name held before (the user's --tls-server-name), or
// none when that was empty: node certificates do not name host ids (the
// DataStax drivers check the chain only as well).
void RouteThroughSniProxy(const SniProxy& proxy, const std::string& host_id, TransportOptions* t);

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_SNI_ENDPOINT_H_
