// Copyright (c) cqlstream authors.
#include "net/system_tables.h"

#include <gtest/gtest.h>

#include "cql/test_util.h"

namespace cqlstream::net {
namespace {

using cql::testing::MakeRows;
using cql::testing::RowsSpec;
using cql::Bytes;

DataType T(TypeId id) { return DataType::Simple(id); }
const char* kId = "11111111-2222-3333-4444-555555555555";

std::vector<std::pair<std::string, DataType>> HostColumns() {
  return {{"data_center", T(TypeId::kVarchar)}, {"rack", T(TypeId::kVarchar)},
          {"release_version", T(TypeId::kVarchar)}, {"host_id", T(TypeId::kUuid)},
          {"tokens", DataType::Set(T(TypeId::kVarchar))}, {"schema_version", T(TypeId::kUuid)}};
}
std::vector<std::optional<Value>> HostCells() {
  return {Value::Text("dc1"), Value::Text("r1"), Value::Text("5.0.2"), Value::FromUuid(*Uuid::Parse(kId)),
          Value::List({Value::Text("9"), Value::Text("-3"), Value::Text("not-a-murmur3-token")}),
          Value::FromUuid(*Uuid::Parse(kId))};
}

RowsSpec Local() {
  RowsSpec s;
  s.keyspace = "system";
  s.table = "local";
  s.columns = {{"cluster_name", T(TypeId::kVarchar)}};
  for (auto& c : HostColumns()) s.columns.push_back(c);
  s.rows.push_back({Value::Text("Test Cluster")});
  for (auto& c : HostCells()) s.rows.back().push_back(c);
  return s;
}

RowsSpec PeersV2() {
  RowsSpec s;
  s.keyspace = "system";
  s.table = "peers_v2";
  s.columns = {{"peer", T(TypeId::kInet)}, {"native_address", T(TypeId::kInet)}, {"native_port", T(TypeId::kInt)}};
  for (auto& c : HostColumns()) s.columns.push_back(c);
  auto row = [](Bytes peer, std::optional<Value> native, std::optional<Value> port) {
    std::vector<std::optional<Value>> r = {Value::Blob(std::move(peer)), std::move(native), std::move(port)};
    for (auto& c : HostCells()) r.push_back(c);
    return r;
  };
  s.rows.push_back(row({127, 0, 0, 2}, Value::Blob(Bytes{10, 0, 0, 2}), Value::Int(9043)));
  s.rows.push_back(row({127, 0, 0, 3}, Value::Blob(Bytes{0, 0, 0, 0}), std::nullopt));  // all interfaces
  s.rows.push_back(row({127, 0, 0, 4}, std::nullopt, Value::Int(0)));
  return s;
}

TEST(SystemTables, LocalRow) {
  auto l = ParseSystemLocal(MakeRows(Local()));
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->cluster_name, "Test Cluster");
  EXPECT_EQ(l->host.datacenter, "dc1");
  EXPECT_EQ(l->host.rack, "r1");
  EXPECT_EQ(l->host.release_version, "5.0.2");
  EXPECT_EQ(l->host.host_id, kId);
  EXPECT_EQ(l->host.schema_version, kId);
  EXPECT_EQ(l->host.tokens, (std::vector<int64_t>{-3, 9}));  // sorted, the non-number left out
}

// Issue 9 item 5: an answer without the requested columns made `ping` print
// an empty cluster and exit 0.
TEST(SystemTables, EveryRequestedColumnMustBeThere) {
  for (size_t drop = 0; drop < Local().columns.size(); ++drop) {
    RowsSpec s = Local();
    const std::string name = s.columns[drop].first;
    s.columns.erase(s.columns.begin() + long(drop));
    s.rows[0].erase(s.rows[0].begin() + long(drop));
    auto l = ParseSystemLocal(MakeRows(s));
    ASSERT_FALSE(l.ok()) << name;
    EXPECT_EQ(l.status().code(), Status::Code::kProtocolError);
    EXPECT_NE(l.status().message().find("system.local lacks the requested column '" + name + "'"), std::string::npos)
        << l.status().ToString();
  }
  for (size_t drop = 0; drop < PeersV2().columns.size(); ++drop) {
    RowsSpec s = PeersV2();
    s.columns.erase(s.columns.begin() + long(drop));
    for (auto& r : s.rows) r.erase(r.begin() + long(drop));
    EXPECT_EQ(ParseSystemPeers(MakeRows(s), true).status().code(), Status::Code::kProtocolError) << drop;
    s.rows.clear();  // an empty answer is checked too
    EXPECT_EQ(ParseSystemPeers(MakeRows(s), true).status().code(), Status::Code::kProtocolError) << drop;
  }
}

TEST(SystemTables, WrongTypesAreProtocolErrors) {
  RowsSpec s = Local();
  s.columns[1].second = T(TypeId::kInt);  // data_center as int
  s.rows[0][1] = Value::Int(1);
  auto l = ParseSystemLocal(MakeRows(s));
  EXPECT_EQ(l.status().code(), Status::Code::kProtocolError);
  EXPECT_NE(l.status().message().find("'data_center' of system.local has type int, expected text"),
            std::string::npos)
      << l.status().ToString();
  RowsSpec p = PeersV2();
  p.columns[0].second = T(TypeId::kVarchar);  // peer as text
  for (auto& r : p.rows) r[0] = Value::Text("127.0.0.2");
  EXPECT_EQ(ParseSystemPeers(MakeRows(p), true).status().code(), Status::Code::kProtocolError);
}

TEST(SystemTables, LocalMustHaveOneRow) {
  RowsSpec s = Local();
  s.rows.clear();
  EXPECT_EQ(ParseSystemLocal(MakeRows(s)).status().code(), Status::Code::kProtocolError);
}

TEST(SystemTables, PeersAddressesAndPorts) {
  auto p = ParseSystemPeers(MakeRows(PeersV2()), true);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->size(), 3u);
  EXPECT_EQ((*p)[0].address, "10.0.0.2");
  EXPECT_EQ((*p)[0].port, std::optional<uint16_t>(9043));
  EXPECT_EQ((*p)[1].address, "127.0.0.3");  // 0.0.0.0: the peer address
  EXPECT_EQ((*p)[1].port, std::nullopt);
  EXPECT_EQ((*p)[2].address, "127.0.0.4");  // null native address
  EXPECT_EQ((*p)[2].port, std::nullopt);    // 0: the default port
  EXPECT_EQ((*p)[0].tokens, (std::vector<int64_t>{-3, 9}));

  RowsSpec bad = PeersV2();
  bad.rows[0][2] = Value::Int(70000);
  EXPECT_EQ(ParseSystemPeers(MakeRows(bad), true).status().code(), Status::Code::kProtocolError);
  RowsSpec null_peer = PeersV2();
  null_peer.rows[0][0] = std::nullopt;
  EXPECT_EQ(ParseSystemPeers(MakeRows(null_peer), true).status().code(), Status::Code::kProtocolError);
}

TEST(SystemTables, PeersV1UsesRpcAddress) {
  RowsSpec s;
  s.keyspace = "system";
  s.table = "peers";
  s.columns = {{"peer", T(TypeId::kInet)}, {"rpc_address", T(TypeId::kInet)}};
  for (auto& c : HostColumns()) s.columns.push_back(c);
  s.rows.push_back({Value::Blob(Bytes{127, 0, 0, 2}), Value::Blob(Bytes{10, 1, 1, 1})});
  for (auto& c : HostCells()) s.rows.back().push_back(c);
  auto p = ParseSystemPeers(MakeRows(s), false);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)[0].address, "10.1.1.1");
  EXPECT_FALSE(ParseSystemPeers(MakeRows(s), true).ok());  // no native_address
}

TEST(SystemTables, NullsBecomeEmptyValues) {
  RowsSpec s = Local();
  for (size_t c = 1; c < s.rows[0].size(); ++c) s.rows[0][c] = std::nullopt;
  auto l = ParseSystemLocal(MakeRows(s));
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_TRUE(l->host.datacenter.empty());
  EXPECT_TRUE(l->host.tokens.empty());
}

TEST(SystemTables, KeyspacesAndSchemaVersion) {
  RowsSpec s;
  s.keyspace = "system_schema";
  s.table = "keyspaces";
  s.columns = {{"keyspace_name", T(TypeId::kVarchar)},
               {"replication", DataType::Map(T(TypeId::kVarchar), T(TypeId::kVarchar))}};
  s.rows.push_back({Value::Text("ks"), Value::Map({{Value::Text("class"), Value::Text("SimpleStrategy")},
                                                   {Value::Text("replication_factor"), Value::Text("3")}})});
  auto k = ParseKeyspaces(MakeRows(s));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(k->at("ks").at("replication_factor"), "3");
  s.columns[1].second = DataType::Map(T(TypeId::kVarchar), T(TypeId::kInt));
  s.rows.clear();
  EXPECT_EQ(ParseKeyspaces(MakeRows(s)).status().code(), Status::Code::kProtocolError);

  RowsSpec v;
  v.keyspace = "system";
  v.table = "local";
  v.columns = {{"schema_version", T(TypeId::kUuid)}};
  v.rows.push_back({Value::FromUuid(*Uuid::Parse(kId))});
  EXPECT_EQ(*ParseSchemaVersion(MakeRows(v)), kId);
  v.rows[0][0] = std::nullopt;
  EXPECT_EQ(ParseSchemaVersion(MakeRows(v)).status().code(), Status::Code::kProtocolError);
}

}  // namespace
}  // namespace cqlstream::net
