// Copyright (c) cqlstream authors.
//
// HostPool on ScyllaDB, against in-process fake nodes: one connection per
// shard through the shard-aware port, each request on its token's shard,
// for at most max_shard_connections shards whatever the node claims, and
// no more shard-aware connections in all, wherever the node says each
// landed.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cql/wire.h"
#include "net/fake_server_test_util.h"
#include "net/io_pool.h"
#include "net/pool.h"
#include "net/pool_test_util.h"
#include "net/routing/murmur3.h"
#include "net/routing/sharding.h"
#include "net/session.h"

namespace cqlstream::net {
namespace {

using testing::Eventually;
using testing::FakeOwner;
using testing::FakeServer;
using testing::FastReconnect;
using namespace std::chrono_literals;

// What a ScyllaDB node's SUPPORTED says of a connection on `shard` of
// `shards`, its shard-aware port `aware`.
std::map<std::string, std::vector<std::string>> ShardingOptions(int shard, int shards, uint16_t aware,
                                                                int ignore_msb = 12) {
  return {
      {"SCYLLA_SHARD", {std::to_string(shard)}},
      {"SCYLLA_NR_SHARDS", {std::to_string(shards)}},
      {"SCYLLA_PARTITIONER", {"org.apache.cassandra.dht.Murmur3Partitioner"}},
      {"SCYLLA_SHARDING_ALGORITHM", {"biased-token-round-robin"}},
      {"SCYLLA_SHARDING_IGNORE_MSB", {std::to_string(ignore_msb)}},
      {"SCYLLA_SHARD_AWARE_PORT", {std::to_string(aware)}},
  };
}

TEST(HostPoolTest, OneConnectionPerShardThroughTheShardAwarePort) {
  constexpr int kShards = 3;
  constexpr int kIgnoreMsb = 12;
  FakeServer srv({0, 0});  // port(0): regular, port(1): shard-aware
  const uint16_t aware = srv.port(1);
  srv.SetSupportedFn([&](const testing::Request& r) {
    // The server's shard of a connection is its source port modulo the shard
    // count (on the regular port the port is whatever the kernel chose).
    return ShardingOptions(r.client_port % kShards, kShards, aware, kIgnoreMsb);
  });
  IoPool io(1);
  auto owner = std::make_shared<FakeOwner>(&io);
  owner->per_host = 1;
  auto pool = HostPool::Make("127.0.0.1", srv.port(0), FastReconnect(), owner);
  pool->Fill();
  // The first connection (regular port, any shard) plus one per shard.
  ASSERT_TRUE(Eventually([&] { return pool->state().open_connections == kShards + 1; }));
  EXPECT_EQ(pool->state().shards, kShards);
  EXPECT_FALSE(pool->Shrinks());  // spread over the shards: never parked nor closed for a count
  // A token's request goes to a connection of its shard.
  for (int k = 0; k < 12; ++k) {
    uint8_t key[4];
    cql::StoreU32(key, static_cast<uint32_t>(k));
    const int64_t token = routing::Murmur3Token(key);
    const int want = routing::ShardOfToken(token, kShards, kIgnoreMsb);
    auto c = pool->Pick(token, {});
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->local_port() % kShards, want) << "key " << k;
  }
  pool->Close(Status::Cancelled("test over"));
}

// A node's SUPPORTED answer claims the shard count (up to 65535 parse):
// the pool opens a connection for each of at most max_shard_connections
// shards, or of the wanted number when more, not one per claimed shard.
TEST(HostPoolTest, AClaimedShardCountDoesNotSizeThePool) {
  constexpr int kShards = 1000;
  FakeServer srv({0, 0});  // port(0): regular, port(1): shard-aware
  const uint16_t aware = srv.port(1);
  srv.SetSupportedFn([&](const testing::Request& r) {
    return ShardingOptions(r.client_port % kShards, kShards, aware);
  });
  IoPool io(1);
  auto owner = std::make_shared<FakeOwner>(&io);
  owner->per_host = 1;
  PoolConfig config = FastReconnect();
  config.max_shard_connections = 4;
  auto pool = HostPool::Make("127.0.0.1", srv.port(0), config, owner);
  pool->Fill();
  // The first connection (regular port) plus one for each of 4 shards.
  ASSERT_TRUE(Eventually([&] { return pool->state().open_connections == 5; }));
  EXPECT_EQ(pool->state().shards, kShards);
  std::this_thread::sleep_for(200ms);  // and no more follow
  EXPECT_EQ(pool->state().open_connections, 5);
  EXPECT_EQ(owner->opens, 5);
  // Wanted beyond the cap: a shard each for as many as wanted.
  owner->per_host = 9;
  pool->Fill();
  ASSERT_TRUE(Eventually([&] { return pool->state().open_connections == 10; }));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(pool->state().open_connections, 10);
  EXPECT_EQ(owner->opens, 10);
  pool->Close(Status::Cancelled("test over"));
}

// A node that names one shard for every connection (as NAT or a proxy that
// rewrites source ports would make it, or a lie): the connections opened
// for other shards count where they were meant to go, so Fill after Fill
// opens no more than the pool's shard-aware number in all.
TEST(HostPoolTest, ConnectionsThatLandOnAnotherShardStillCount) {
  constexpr int kShards = 1000;
  FakeServer srv({0, 0});
  const uint16_t aware = srv.port(1);
  srv.SetSupportedFn([&](const testing::Request&) {
    return ShardingOptions(999, kShards, aware);
  });
  IoPool io(1);
  auto owner = std::make_shared<FakeOwner>(&io);
  owner->per_host = 1;
  PoolConfig config = FastReconnect();
  config.max_shard_connections = 4;
  auto pool = HostPool::Make("127.0.0.1", srv.port(0), config, owner);
  pool->Fill();
  ASSERT_TRUE(Eventually([&] { return pool->state().open_connections == 5; }));
  for (int i = 0; i < 5; ++i) {
    pool->Fill();
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(pool->state().open_connections, 5);
  EXPECT_EQ(owner->opens, 5);
  pool->Close(Status::Cancelled("test over"));
}

// The cap is the session's ConnectionOptions::max_shard_connections: a
// session to a node claiming 1,000 shards opens its first connection and
// one for each of 4 shards, and no more.
TEST(ShardAwareSessionTest, ConnectionOptionsCapTheShardConnections) {
  constexpr int kShards = 1000;
  FakeServer srv({0, 0});
  const uint16_t aware = srv.port(1);
  srv.SetSupportedFn([&](const testing::Request& r) {
    return ShardingOptions(r.client_port % kShards, kShards, aware);
  });
  ConnectionOptions o;
  o.hosts = {"127.0.0.1"};
  o.port = srv.port(0);
  o.connections_per_host = 1;
  o.io_threads = 1;
  o.max_shard_connections = 4;
  auto s = Session::Connect(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto open = [&] {
    auto hosts = (*s)->Hosts();
    return hosts.size() == 1 ? hosts[0].open_connections : -1;
  };
  ASSERT_TRUE(Eventually([&] { return open() == 5; })) << open();
  std::this_thread::sleep_for(200ms);  // and no more follow
  EXPECT_EQ(open(), 5);
  EXPECT_EQ((*s)->Hosts()[0].shards, kShards);
  (*s)->Close();
}

}  // namespace
}  // namespace cqlstream::net
