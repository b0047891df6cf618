// Copyright (c) cqlstream authors.
//
// The system tables a session reads to learn the cluster, as pure functions
// from a decoded answer to values: system.local, system.peers_v2 (falling
// back to system.peers on older servers and ScyllaDB), system_schema.keyspaces
// and a host's own schema version. Every column a query below requests must
// be in the answer with the type the server documents, else the answer is a
// ProtocolError naming the table and the column (a server, or something in
// between, that drops or retypes columns must not become an empty cluster).
// Null cells are allowed where a real server may leave them null (a joining
// node has no tokens yet); they become empty values.
//
// Thread-safety: pure functions of their arguments.
#ifndef CQLSTREAM_NET_SYSTEM_TABLES_H_
#define CQLSTREAM_NET_SYSTEM_TABLES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cql/response.h"
#include "cqlstream/status.h"

namespace cqlstream::net {

inline constexpr const char* kLocalQuery =
    "SELECT cluster_name, data_center, rack, release_version, host_id, tokens, schema_version "
    "FROM system.local WHERE key='local'";
inline constexpr const char* kPeersV2Query =
    "SELECT peer, data_center, rack, release_version, host_id, tokens, schema_version, "
    "native_address, native_port FROM system.peers_v2";
inline constexpr const char* kPeersQuery =
    "SELECT peer, data_center, rack, release_version, host_id, tokens, schema_version, rpc_address "
    "FROM system.peers";
inline constexpr const char* kKeyspacesQuery = "SELECT keyspace_name, replication FROM system_schema.keyspaces";
inline constexpr const char* kSchemaVersionQuery = "SELECT schema_version FROM system.local WHERE key='local'";

// One host as the system tables describe it.
struct SystemHost {
  std::string address;          // peers: where clients connect (native/rpc address, else peer); local: empty
  std::optional<uint16_t> port;  // peers_v2: native_port when set
  std::string datacenter, rack, release_version, host_id, schema_version;
  std::vector<int64_t> tokens;  // sorted; tokens that are not Murmur3 numbers are left out
};

struct SystemLocal {
  std::string cluster_name;
  SystemHost host;
};

// The answer to kLocalQuery: exactly one row.
StatusOr<SystemLocal> ParseSystemLocal(const cql::Rows& rows);
// The answer to kPeersV2Query (v2) or kPeersQuery.
StatusOr<std::vector<SystemHost>> ParseSystemPeers(const cql::Rows& rows, bool v2);
// The answer to kKeyspacesQuery: keyspace -> replication options.
StatusOr<std::map<std::string, std::map<std::string, std::string>>> ParseKeyspaces(const cql::Rows& rows);
// The answer to kSchemaVersionQuery: the host's schema version.
StatusOr<std::string> ParseSchemaVersion(const cql::Rows& rows);

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_SYSTEM_TABLES_H_
