// Copyright (c) cqlstream authors.
#include "net/system_tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace cqlstream::net {
namespace {

using cql::Rows;

// Checks that every requested column is present with its documented type,
// before any row is read (an empty answer is checked too).
template <typename T>
Status Require(const Rows& r, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    auto c = r.ColumnOf<T>(n);
    if (!c.ok()) return c.status();
  }
  return Status::OK();
}

Status RequireHostColumns(const Rows& r) {
  CQLS_RETURN_IF_ERROR(Require<std::string>(r, {"data_center", "rack", "release_version"}));
  CQLS_RETURN_IF_ERROR(Require<Uuid>(r, {"host_id", "schema_version"}));
  return Require<std::vector<std::string>>(r, {"tokens"});
}

template <typename T>
StatusOr<T> OrEmpty(const Rows& r, int32_t row, const char* col) {
  auto v = r.GetOptional<T>(row, col);
  if (!v.ok()) return v.status();
  return v->value_or(T{});
}

StatusOr<std::string> UuidText(const Rows& r, int32_t row, const char* col) {
  auto v = r.GetOptional<Uuid>(row, col);
  if (!v.ok()) return v.status();
  return *v ? (*v)->ToString() : std::string();
}

// Murmur3 tokens are decimal int64 numbers; tokens of other partitioners are
// not routable and left out.
std::vector<int64_t> Murmur3Tokens(const std::vector<std::string>& texts) {
  std::vector<int64_t> out;
  out.reserve(texts.size());
  for (const auto& t : texts) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec == std::errc() && end == t.data() + t.size()) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status FillHost(const Rows& r, int32_t row, SystemHost* h) {
  CQLS_ASSIGN_OR_RETURN(h->datacenter, OrEmpty<std::string>(r, row, "data_center"));
  CQLS_ASSIGN_OR_RETURN(h->rack, OrEmpty<std::string>(r, row, "rack"));
  CQLS_ASSIGN_OR_RETURN(h->release_version, OrEmpty<std::string>(r, row, "release_version"));
  CQLS_ASSIGN_OR_RETURN(h->host_id, UuidText(r, row, "host_id"));
  CQLS_ASSIGN_OR_RETURN(h->schema_version, UuidText(r, row, "schema_version"));
  CQLS_ASSIGN_OR_RETURN(std::vector<std::string> tokens, OrEmpty<std::vector<std::string>>(r, row, "tokens"));
  h->tokens = Murmur3Tokens(tokens);
  return Status::OK();
}

bool Unspecified(const cql::InetAddress& a) {
  return std::all_of(a.bytes.begin(), a.bytes.end(), [](uint8_t b) { return b == 0; });
}

StatusOr<SystemHost> ParsePeer(const Rows& r, int32_t row, bool v2) {
  SystemHost h;
  CQLS_RETURN_IF_ERROR(FillHost(r, row, &h));
  auto peer = r.Get<cql::InetAddress>(row, "peer");
  if (!peer.ok()) return peer.status();
  auto native = r.GetOptional<cql::InetAddress>(row, v2 ? "native_address" : "rpc_address");
  if (!native.ok()) return native.status();
  // A node that listens on all interfaces reports 0.0.0.0 / ::: then the
  // peer address is where it can be reached.
  h.address = (*native && !Unspecified(**native)) ? (*native)->ToString() : peer->ToString();
  if (v2) {
    auto port = r.GetOptional<int32_t>(row, "native_port");
    if (!port.ok()) return port.status();
    if (*port && **port != 0) {
      if (**port < 0 || **port > 65535) {
        return Status::ProtocolError(fmt::format("system.peers_v2: peer {} has native_port {}", h.address, **port));
      }
      h.port = static_cast<uint16_t>(**port);
    }
  }
  return h;
}

}  // namespace

StatusOr<SystemLocal> ParseSystemLocal(const Rows& r) {
  CQLS_RETURN_IF_ERROR(Require<std::string>(r, {"cluster_name"}));
  CQLS_RETURN_IF_ERROR(RequireHostColumns(r));
  if (r.row_count() != 1) {
    return Status::ProtocolError(fmt::format("system.local answered {} rows (expected 1)", r.row_count()));
  }
  SystemLocal out;
  auto name = OrEmpty<std::string>(r, 0, "cluster_name");
  if (!name.ok()) return name.status();
  out.cluster_name = std::move(*name);
  CQLS_RETURN_IF_ERROR(FillHost(r, 0, &out.host));
  return out;
}

StatusOr<std::vector<SystemHost>> ParseSystemPeers(const Rows& r, bool v2) {
  CQLS_RETURN_IF_ERROR(RequireHostColumns(r));
  CQLS_RETURN_IF_ERROR(Require<cql::InetAddress>(r, {"peer", v2 ? "native_address" : "rpc_address"}));
  if (v2) CQLS_RETURN_IF_ERROR(Require<int32_t>(r, {"native_port"}));
  std::vector<SystemHost> out;
  out.reserve(size_t(r.row_count()));
  for (int32_t i = 0; i < r.row_count(); ++i) {
    auto h = ParsePeer(r, i, v2);
    if (!h.ok()) return h.status();
    out.push_back(std::move(*h));
  }
  return out;
}

StatusOr<std::map<std::string, std::map<std::string, std::string>>> ParseKeyspaces(const Rows& r) {
  CQLS_RETURN_IF_ERROR(Require<std::string>(r, {"keyspace_name"}));
  using StringMap = std::map<std::string, std::string>;
  CQLS_RETURN_IF_ERROR(Require<StringMap>(r, {"replication"}));
  std::map<std::string, std::map<std::string, std::string>> out;
  for (int32_t i = 0; i < r.row_count(); ++i) {
    auto name = r.Get<std::string>(i, "keyspace_name");
    if (!name.ok()) return name.status();
    auto rep = OrEmpty<StringMap>(r, i, "replication");
    if (!rep.ok()) return rep.status();
    out[std::move(*name)] = std::move(*rep);
  }
  return out;
}

StatusOr<std::string> ParseSchemaVersion(const Rows& r) {
  CQLS_RETURN_IF_ERROR(Require<Uuid>(r, {"schema_version"}));
  if (r.row_count() != 1) {
    return Status::ProtocolError(fmt::format("system.local answered {} rows (expected 1)", r.row_count()));
  }
  auto v = r.Get<Uuid>(0, "schema_version");
  if (!v.ok()) return v.status();
  return v->ToString();
}

}  // namespace cqlstream::net
