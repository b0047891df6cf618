// Copyright (c) cqlstream authors.
//
// cqlstream-plan-micro: what choosing the hosts of one request costs — the
// part of every request's path that runs before a connection is picked
// (net::Session::Impl::QueryPlan): the routing token of the bound partition
// key (net::RoutingOf) and the host order (DefaultLoadBalancingPolicy::Plan).
// Google Benchmark, hand-made clusters (no connections):
//
//   RoutingOf/<n>      the token of a key of n int components (the loader's
//                      data tables have 2: (seg, idx); 1: a one-column key)
//   Plan/<hosts>       the plan of a request whose token has one local
//                      replica (RF 1 in one DC: hosts = 1 is one node, as in
//                      bench/run), among `hosts` up hosts of one DC
//   PlanTwoDcs         6 hosts, 3 per DC, 3 replicas (two in the local DC),
//                      one host of the local DC down
//
// Single-threaded; nothing is shared between cases.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/load_balancing.h"
#include "net/pool.h"
#include "net/session.h"
#include "net/session_impl.h"

namespace cqlstream::bench {
namespace {

using net::HostPtr;

HostPtr MakeHost(const std::string& address, const std::string& dc, bool up = true) {
  auto h = std::make_shared<net::Host>();
  h->address = address;
  h->port = 9042;
  h->datacenter = dc;
  h->pool = net::HostPool::Make(address, 9042, net::PoolConfig{}, {});  // never opens anything
  if (!up) h->pool->MarkDown();
  return h;
}

void RoutingOf(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  auto ps = std::make_shared<net::PreparedStatement>();
  ps->keyspace = "cqlstream_bench";
  net::Statement st;
  for (int i = 0; i < n; ++i) {
    ps->bind_types.push_back(DataType::Simple(TypeId::kInt));
    ps->pk_indexes.push_back(static_cast<uint16_t>(i));
    st.values.push_back(Value::Int(1000 + i));
  }
  st.prepared = ps;
  for (auto _ : state) {
    net::RoutingInfo r = net::RoutingOf(st);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(RoutingOf)->Arg(1)->Arg(2);

// Times the plan of a request of a routed token whose replicas are
// `replicas`, among `hosts` (the local data centre: dc1).
void TimePlans(benchmark::State& state, const std::vector<HostPtr>& hosts, const std::vector<HostPtr>& replicas) {
  net::ClusterView view{hosts, "dc1", [&replicas](const std::string&, int64_t) { return replicas; }};
  net::DefaultLoadBalancingPolicy policy;
  net::RoutingInfo r;
  r.token = 42;
  r.keyspace = "cqlstream_bench";
  for (auto _ : state) {
    auto plan = policy.Plan(r, view);
    if (plan.size() != hosts.size()) state.SkipWithError("a host missing from the plan");
    benchmark::DoNotOptimize(plan);
  }
}

void Plan(benchmark::State& state) {
  std::vector<HostPtr> hosts;
  for (int i = 0; i < state.range(0); ++i) hosts.push_back(MakeHost("10.0.0." + std::to_string(i + 1), "dc1"));
  TimePlans(state, hosts, {hosts.back()});
}
BENCHMARK(Plan)->Arg(1)->Arg(3)->Arg(12);

void PlanTwoDcs(benchmark::State& state) {
  std::vector<HostPtr> hosts{MakeHost("10.0.0.1", "dc1"), MakeHost("10.0.0.2", "dc1"),
                             MakeHost("10.0.0.3", "dc1", /*up=*/false), MakeHost("10.0.1.1", "dc2"),
                             MakeHost("10.0.1.2", "dc2"), MakeHost("10.0.1.3", "dc2")};
  TimePlans(state, hosts, {hosts[1], hosts[4], hosts[0]});
}
BENCHMARK(PlanTwoDcs);

}  // namespace
}  // namespace cqlstream::bench

BENCHMARK_MAIN();
