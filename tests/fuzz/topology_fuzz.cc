// Copyright (c) cqlstream authors.
//
// libFuzzer target for what a server's system tables make of the cluster:
// the answers to system.local, system.peers_v2 (or system.peers) and
// system_schema.keyspaces, as Rows bodies built from the input — each
// column under its query's name, of its documented type or another, left
// out now and then, each cell null, arbitrary bytes or a well-formed value
// drawn from a small alphabet (so that addresses, host ids and tokens
// repeat) — decoded (cql::DecodeResponse) and parsed (net/system_tables.h),
// then the topology (BuildTopology), what a session makes of it and of up
// to three refreshes after it (Session::Impl::ApplyTopology: known hosts'
// objects and pools kept by host id or endpoint), each keyspace's replica
// index (ReplicaIndex::Build: the ring of the hosts' tokens under the
// keyspace's replication) and request plans over it
// (DefaultLoadBalancingPolicy).
//
// Checked (abort): the topology lists each endpoint once, the contact's host
// first and not again under its host id, and counts every peer row it left
// out; after each refresh, every endpoint is one host's, each host has an
// open pool of its own that connects to it, and the pools no host holds
// any more are closed (CheckRefresh); the replicas of a token are hosts of
// the topology, each once; a plan holds every host of the topology exactly
// once, in the order of the plan as it was made before it compared
// endpoints in place (ReferencePlan), with some hosts down and the local
// data centre named or not. Nothing may crash, trap (UBSan) or leak (ASan)
// whatever the rows say.
//
// Input: see LLVMFuzzerTestOneInput.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cql/frame.h"
#include "cql/response.h"
#include "cql/wire.h"
#include "net/control.h"
#include "net/load_balancing.h"
#include "net/pool.h"
#include "net/session_impl.h"
#include "net/system_tables.h"
#include "net/topology.h"

namespace cqlstream::net {
namespace {

// CQL type ids (native protocol v4, section 4.2.5.2).
constexpr uint16_t kInt = 0x0009, kUuid = 0x000C, kText = 0x000D, kInet = 0x0010, kMap = 0x0021,
                   kSet = 0x0022;

enum class Kind { kText, kUuid, kInet, kInt, kTextSet, kTextMap };

struct Column {
  const char* name;
  Kind kind;
};

uint16_t TypeOf(Kind k) {
  switch (k) {
    case Kind::kText: return kText;
    case Kind::kUuid: return kUuid;
    case Kind::kInet: return kInet;
    case Kind::kInt: return kInt;
    case Kind::kTextSet: return kSet;
    case Kind::kTextMap: return kMap;
  }
  return kText;
}

std::string Pick(FuzzedDataProvider& in, std::initializer_list<const char*> some) {
  const size_t i = in.ConsumeIntegralInRange<size_t>(0, some.size());
  if (i == some.size()) return in.ConsumeRandomLengthString(24);
  return *(some.begin() + i);
}

// A [bytes] cell of `k`, well formed, from a small alphabet.
cql::Bytes WellFormed(FuzzedDataProvider& in, Kind k) {
  cql::Bytes b;
  cql::Writer w(&b);
  switch (k) {
    case Kind::kText: {
      const std::string s = Pick(in, {"dc1", "dc2", "rack1", "5.0.9", "c1"});
      w.Raw(cql::ByteView(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
      break;
    }
    case Kind::kUuid: {
      std::array<uint8_t, 16> u{};
      u[15] = in.ConsumeIntegralInRange<uint8_t>(0, 3);
      w.Uuid(u);
      break;
    }
    case Kind::kInet:
      if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {
        for (int i = 0; i < 15; ++i) w.Byte(0);
        w.Byte(in.ConsumeIntegralInRange<uint8_t>(1, 3));  // ::1 .. ::3
      } else {
        w.Byte(127);
        w.Byte(0);
        w.Byte(0);
        w.Byte(in.ConsumeIntegralInRange<uint8_t>(1, 4));
      }
      break;
    case Kind::kInt:
      w.Int(in.ConsumeBool() ? 9042 : in.ConsumeIntegral<int32_t>());
      break;
    case Kind::kTextSet: {
      const int n = in.ConsumeIntegralInRange<int>(0, 6);
      w.Int(n);
      for (int i = 0; i < n; ++i) {
        const std::string t = in.ConsumeBool() ? std::to_string(in.ConsumeIntegralInRange<int64_t>(-4, 4) *
                                                                (INT64_MAX / 4))
                                               : in.ConsumeRandomLengthString(24);
        w.BytesValue(cql::ByteView(reinterpret_cast<const uint8_t*>(t.data()), t.size()));
      }
      break;
    }
    case Kind::kTextMap: {
      std::map<std::string, std::string> m;
      m["class"] = Pick(in, {"org.apache.cassandra.locator.SimpleStrategy",
                             "org.apache.cassandra.locator.NetworkTopologyStrategy", "LocalStrategy"});
      const int n = in.ConsumeIntegralInRange<int>(0, 3);
      for (int i = 0; i < n; ++i) m[Pick(in, {"replication_factor", "dc1", "dc2"})] = Pick(in, {"1", "2", "3", "0"});
      w.Int(static_cast<int32_t>(m.size()));
      for (const auto& [key, value] : m) {
        w.BytesValue(cql::ByteView(reinterpret_cast<const uint8_t*>(key.data()), key.size()));
        w.BytesValue(cql::ByteView(reinterpret_cast<const uint8_t*>(value.data()), value.size()));
      }
      break;
    }
  }
  return b;
}

// The Rows answer to a query of `columns` on system.<table>, or nullopt when
// the bytes do not decode as one (the decoder's own fuzz target covers that).
std::optional<cql::Rows> Answer(FuzzedDataProvider& in, const char* keyspace, const char* table,
                                const std::vector<Column>& columns, int max_rows) {
  std::vector<std::pair<Column, uint16_t>> sent;  // (column, type id sent)
  for (const Column& c : columns) {
    const uint8_t how = in.ConsumeIntegral<uint8_t>();
    if (how < 8) continue;  // left out
    sent.emplace_back(c, how < 24 ? static_cast<uint16_t>(in.ConsumeIntegralInRange<uint16_t>(1, 0x15))
                                  : TypeOf(c.kind));
  }
  cql::Bytes body;
  cql::Writer w(&body);
  w.Int(0x0002);  // Rows
  w.Int(cql::RowsMetadata::kGlobalTablesSpec);
  w.Int(static_cast<int32_t>(sent.size()));
  w.String(keyspace);
  w.String(table);
  for (const auto& [c, type] : sent) {
    w.String(c.name);
    w.Short(type);
    if (type == kSet) w.Short(kText);
    if (type == kMap) {
      w.Short(kText);
      w.Short(kText);
    }
  }
  const int rows = in.ConsumeIntegralInRange<int>(0, max_rows);
  w.Int(rows);
  for (int r = 0; r < rows; ++r) {
    for (const auto& [c, type] : sent) {
      const uint8_t how = in.ConsumeIntegral<uint8_t>();
      if (how < 16) {
        w.BytesValue(std::nullopt);
      } else if (how < 40 || type != TypeOf(c.kind)) {
        const std::string raw = in.ConsumeRandomLengthString(32);
        w.BytesValue(cql::ByteView(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()));
      } else {
        const cql::Bytes cell = WellFormed(in, c.kind);
        w.BytesValue(cql::ByteView(cell));
      }
    }
  }
  cql::FrameHeader h;
  h.version = cql::kProtocolVersion | cql::kResponseBit;
  h.opcode = cql::Opcode::kResult;
  h.length = static_cast<uint32_t>(body.size());
  auto resp = cql::DecodeResponse(h, std::move(body));
  if (!resp.ok()) return std::nullopt;
  auto* result = std::get_if<cql::Result>(&resp->message);
  auto* rows_result = result ? std::get_if<cql::Rows>(result) : nullptr;
  if (!rows_result) return std::nullopt;
  return std::move(*rows_result);
}

void CheckTopology(const Topology& t, size_t peer_rows, const std::string& contact) {
  if (t.hosts.empty() || t.hosts.front()->address != contact) abort();
  if (t.hosts.size() + static_cast<size_t>(t.ignored_peers) != 1 + peer_rows) abort();  // a row lost uncounted
  std::set<std::string> endpoints;
  for (const auto& h : t.hosts) {
    if (!endpoints.insert(h->endpoint()).second) abort();  // one host per endpoint
  }
  const std::string& self = t.hosts.front()->host_id;
  for (size_t i = 1; i < t.hosts.size(); ++i) {
    if (!self.empty() && t.hosts[i]->host_id == self) abort();  // the contact's node listed again
  }
}

// The plan as DefaultLoadBalancingPolicy made it before it compared
// endpoints in place (a set of formatted endpoints), from round-robin
// position `start`: the order the policy must keep.
std::vector<HostPtr> ReferencePlan(const std::vector<HostPtr>& hosts, const std::vector<HostPtr>& replicas,
                                   std::string_view dc, size_t start, int plan_offset) {
  auto in_dc = [dc](const Host& h) { return dc.empty() || h.datacenter == dc; };
  std::vector<std::pair<int, HostPtr>> by_load;
  for (const auto& h : replicas) {
    if (h->up() && in_dc(*h)) by_load.emplace_back(h->InFlight(), h);
  }
  std::stable_sort(by_load.begin(), by_load.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<HostPtr> plan;
  for (auto& [load, h] : by_load) plan.push_back(h);
  const size_t local_replicas = plan.size();
  std::set<std::string> in_plan;
  for (const auto& h : plan) in_plan.insert(h->endpoint());
  const size_t n = hosts.size();
  for (int pass = 0; pass < 3; ++pass) {
    for (size_t k = 0; k < n; ++k) {
      const HostPtr& h = hosts[(start + k) % n];
      if (in_plan.count(h->endpoint())) continue;
      const bool local = in_dc(*h), up = h->up();
      if ((pass == 0 && up && local) || (pass == 1 && up && !local) || (pass == 2 && !up)) {
        plan.push_back(h);
        in_plan.insert(h->endpoint());
      }
    }
  }
  const size_t turned = local_replicas > 0 ? local_replicas : plan.size();
  if (plan_offset > 0 && turned > 1) {
    const size_t offset = static_cast<size_t>(plan_offset) % turned;
    std::rotate(plan.begin(), plan.begin() + static_cast<long>(offset), plan.begin() + static_cast<long>(turned));
  }
  return plan;
}

void CheckPlans(FuzzedDataProvider& in, const Topology& t) {
  // Some hosts down (a pool that never opens anything, marked down), so
  // that the plans' passes over local, remote and down hosts all run.
  for (const auto& h : t.hosts) {
    if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
      h->pool = HostPool::Make(h->address, h->port, PoolConfig{}, {});
      h->pool->MarkDown();
    }
  }
  DefaultLoadBalancingPolicy policy;
  size_t calls = 0;  // the policy's round-robin position
  for (const auto& [keyspace, replication] : t.replication) {
    auto index = ReplicaIndex::Build(t.hosts, replication);
    if (!index) continue;  // not routable: round-robin, nothing more to check
    for (int k = 0; k < 4 && in.remaining_bytes() > 0; ++k) {
      const int64_t token = in.ConsumeIntegral<int64_t>();
      const std::vector<HostPtr> replicas = index->Replicas(token);
      std::set<const Host*> seen;
      for (const auto& r : replicas) {
        if (std::find(t.hosts.begin(), t.hosts.end(), r) == t.hosts.end()) abort();  // not a host of the topology
        if (!seen.insert(r.get()).second) abort();                                   // a replica twice
      }
      (void)index->ReplicaSet(token, t.hosts.front()->datacenter);
      RoutingInfo request;
      request.token = token;
      request.keyspace = keyspace;
      request.plan_offset = in.ConsumeIntegralInRange<int>(0, 3);
      const std::string dc = in.ConsumeBool() ? t.hosts.front()->datacenter : std::string();
      ClusterView view{t.hosts, dc, [&replicas](const std::string&, int64_t) { return replicas; }};
      const std::vector<HostPtr> plan = policy.Plan(request, view);
      std::set<const Host*> planned;
      for (const auto& h : plan) {
        if (!planned.insert(h.get()).second) abort();  // a host twice in one plan
      }
      if (planned.size() != t.hosts.size()) abort();   // a host missing from the plan
      // A keyspace without a name routes like no token (no replicas asked for).
      const std::vector<HostPtr> asked = keyspace.empty() ? std::vector<HostPtr>{} : replicas;
      if (plan != ReferencePlan(t.hosts, asked, dc, calls % t.hosts.size(), request.plan_offset)) abort();
      ++calls;
    }
  }
}

// What a session makes of refreshes (Session::Impl::ApplyTopology: the
// known hosts' objects and pools kept, by host id or endpoint), checked
// after each: the published topology holds the refresh's hosts in its
// order (by host id), each endpoint once, each with a pool of its own, open
// and connecting to the host's endpoint; a pool of the hosts before that no
// host holds now is closed (the node left or moved), none is left open
// unowned.
void CheckRefresh(const Topology& now, const std::vector<std::string>& ids, const Topology* before) {
  if (now.hosts.size() != ids.size()) abort();  // a host lost or added
  for (size_t i = 0; i < ids.size(); ++i) {
    if (now.hosts[i]->host_id != ids[i]) abort();  // another host in the row's place
  }
  std::set<std::string> endpoints;
  std::set<const HostPool*> pools;
  for (const auto& h : now.hosts) {
    if (!endpoints.insert(h->endpoint()).second) abort();  // two hosts of one endpoint
    if (!h->pool || !pools.insert(h->pool.get()).second) abort();
    if (h->pool->closed()) abort();  // a host in use with a closed pool
    if (h->pool->address() != h->address || h->pool->port() != h->port) abort();  // connecting elsewhere
  }
  if (before == nullptr) return;
  for (const auto& h : before->hosts) {
    if (!pools.count(h->pool.get()) && !h->pool->closed()) abort();  // a pool left open, unowned
  }
}

// One read of the cluster: the peers table's version, the contact, then
// the three answers; nullptr where a parser refuses them (a ProtocolError:
// fine). Checked as BuildTopology made it.
std::shared_ptr<Topology> ReadTopology(FuzzedDataProvider& in) {
  const bool v2 = in.ConsumeBool();
  const std::string contact = Pick(in, {"127.0.0.1", "127.0.0.2", "node1.example"});

  auto local_rows = Answer(in, "system", "local",
                           {{"cluster_name", Kind::kText}, {"data_center", Kind::kText}, {"rack", Kind::kText},
                            {"release_version", Kind::kText}, {"host_id", Kind::kUuid}, {"tokens", Kind::kTextSet},
                            {"schema_version", Kind::kUuid}},
                           2);
  std::vector<Column> peer_columns = {{"peer", Kind::kInet},           {"data_center", Kind::kText},
                                      {"rack", Kind::kText},           {"release_version", Kind::kText},
                                      {"host_id", Kind::kUuid},        {"tokens", Kind::kTextSet},
                                      {"schema_version", Kind::kUuid}};
  if (v2) {
    peer_columns.push_back({"native_address", Kind::kInet});
    peer_columns.push_back({"native_port", Kind::kInt});
  } else {
    peer_columns.push_back({"rpc_address", Kind::kInet});
  }
  auto peer_rows = Answer(in, "system", v2 ? "peers_v2" : "peers", peer_columns, 8);
  auto keyspace_rows = Answer(in, "system_schema", "keyspaces",
                              {{"keyspace_name", Kind::kText}, {"replication", Kind::kTextMap}}, 4);
  if (!local_rows || !peer_rows || !keyspace_rows) return nullptr;

  auto local = ParseSystemLocal(*local_rows);
  auto peers = ParseSystemPeers(*peer_rows, v2);
  auto keyspaces = ParseKeyspaces(*keyspace_rows);
  if (!local.ok() || !peers.ok() || !keyspaces.ok()) return nullptr;
  const size_t peer_count = peers->size();
  auto t = BuildTopology(std::move(*local), contact, std::move(*peers), std::move(*keyspaces), 9042);
  CheckTopology(*t, peer_count, contact);
  return t;
}

}  // namespace
}  // namespace cqlstream::net

// Input (FuzzedDataProvider): a read of the cluster (ReadTopology), the
// number of refreshes, each a read of the cluster, then tokens to route
// over the last topology.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cqlstream::net;
  FuzzedDataProvider in(data, size);
  std::shared_ptr<Topology> first = ReadTopology(in);
  if (!first) return 0;
  const int refreshes = in.ConsumeIntegralInRange<int>(0, 3);
  if (refreshes == 0) {
    CheckPlans(in, *first);
    return 0;
  }
  // A session whose pools never open (closed: Fill does nothing), so that
  // only what ApplyTopology makes of the rows runs.
  auto session = std::make_shared<Session::Impl>();
  session->is_closed = true;
  const auto ids = [](const Topology& t) {
    std::vector<std::string> out;
    for (const auto& h : t.hosts) out.push_back(h->host_id);
    return out;
  };
  const std::vector<std::string> first_ids = ids(*first);
  session->ApplyTopology(std::move(first));
  CheckRefresh(*session->Topo(), first_ids, nullptr);
  for (int r = 0; r < refreshes; ++r) {
    std::shared_ptr<Topology> next = ReadTopology(in);
    if (!next) break;
    const std::shared_ptr<const Topology> before = session->Topo();
    const std::vector<std::string> next_ids = ids(*next);
    session->ApplyTopology(std::move(next));
    CheckRefresh(*session->Topo(), next_ids, before.get());
  }
  CheckPlans(in, *session->Topo());
  return 0;
}
