// Copyright (c) cqlstream authors.
#include "net/routing/sharding.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "net/routing/murmur3.h"

namespace cqlstream::routing {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

ShardingInfo::Options ScyllaOptions() {
  return {
      {"SCYLLA_SHARD", {"1"}},
      {"SCYLLA_NR_SHARDS", {"12"}},
      {"SCYLLA_PARTITIONER", {"org.apache.cassandra.dht.Murmur3Partitioner"}},
      {"SCYLLA_SHARDING_ALGORITHM", {"biased-token-round-robin"}},
      {"SCYLLA_SHARDING_IGNORE_MSB", {"12"}},
      {"SCYLLA_SHARD_AWARE_PORT", {"19042"}},
      {"SCYLLA_SHARD_AWARE_PORT_SSL", {"19142"}},
      // Options of other extensions and of Cassandra are ignored.
      {"CQL_VERSION", {"3.3.1"}},
      {"COMPRESSION", {"lz4", "snappy"}},
      {"SCYLLA_LWT_ADD_METADATA_MARK", {"LWT_OPTIMIZATION_META_BIT_MASK=2147483648"}},
  };
}

int64_t TokenOf(std::string_view key) {
  return Murmur3Token(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(key.data()), key.size()));
}

// The C formulation from protocol-extensions.md, with 128-bit arithmetic
// (a GCC/Clang extension), as an oracle for ShardOf.
int Int128ShardOf(int64_t token, int nr_shards, int ignore_msb) {
  uint64_t biased = static_cast<uint64_t>(token) + (uint64_t{1} << 63);
  biased <<= ignore_msb;
  __extension__ typedef unsigned __int128 Uint128;
  return static_cast<int>((static_cast<Uint128>(biased) * static_cast<uint64_t>(nr_shards)) >> 64);
}

TEST(ShardingTest, ParsesScyllaSupported) {
  auto info = ShardingInfo::Parse(ScyllaOptions());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->shard, 1);
  EXPECT_EQ(info->nr_shards, 12);
  EXPECT_EQ(info->ignore_msb, 12);
  EXPECT_EQ(info->algorithm, "biased-token-round-robin");
  EXPECT_EQ(info->partitioner, "org.apache.cassandra.dht.Murmur3Partitioner");
  EXPECT_EQ(info->shard_aware_port, std::optional<uint16_t>(19042));
  EXPECT_EQ(info->shard_aware_port_ssl, std::optional<uint16_t>(19142));

  std::string why = "stale";
  auto opt = ShardingInfo::FromSupported(ScyllaOptions(), &why);
  ASSERT_TRUE(opt.has_value());
  EXPECT_EQ(opt->nr_shards, 12);
  EXPECT_TRUE(why.empty());
}

TEST(ShardingTest, OptionalKeysMayBeAbsent) {
  auto options = ScyllaOptions();
  options.erase("SCYLLA_SHARD_AWARE_PORT");
  options.erase("SCYLLA_SHARD_AWARE_PORT_SSL");
  options.erase("SCYLLA_PARTITIONER");
  auto info = ShardingInfo::Parse(options);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_FALSE(info->shard_aware_port.has_value());
  EXPECT_FALSE(info->shard_aware_port_ssl.has_value());
  EXPECT_TRUE(info->partitioner.empty());
}

TEST(ShardingTest, CassandraHasNoShardingInfo) {
  const ShardingInfo::Options cassandra = {
      {"CQL_VERSION", {"3.4.7"}},
      {"COMPRESSION", {"lz4", "snappy"}},
      {"PROTOCOL_VERSIONS", {"3/v3", "4/v4", "5/v5"}},
  };
  auto info = ShardingInfo::Parse(cassandra);
  EXPECT_EQ(info.status().code(), Status::Code::kNotFound);
  std::string why;
  EXPECT_FALSE(ShardingInfo::FromSupported(cassandra, &why).has_value());
  EXPECT_NE(why.find("not a ScyllaDB node"), std::string::npos) << why;
  EXPECT_FALSE(ShardingInfo::FromSupported(cassandra).has_value());  // why_not is optional
}

struct BadCase {
  const char* key;
  std::vector<std::string> values;  // empty: erase the key
  Status::Code code;
  const char* message_part;
};

TEST(ShardingTest, BadValuesAreRejectedWithReasons) {
  const std::vector<BadCase> cases = {
      {"SCYLLA_NR_SHARDS", {}, Status::Code::kProtocolError, "no SCYLLA_NR_SHARDS"},
      {"SCYLLA_SHARD", {}, Status::Code::kProtocolError, "no SCYLLA_SHARD"},
      {"SCYLLA_SHARDING_IGNORE_MSB", {}, Status::Code::kProtocolError, "no SCYLLA_SHARDING_IGNORE"},
      {"SCYLLA_SHARDING_ALGORITHM", {}, Status::Code::kProtocolError, "no SCYLLA_SHARDING_ALGO"},
      {"SCYLLA_NR_SHARDS", {"0"}, Status::Code::kProtocolError, "SCYLLA_NR_SHARDS='0'"},
      {"SCYLLA_NR_SHARDS", {"65536"}, Status::Code::kProtocolError, "[1, 65535]"},
      {"SCYLLA_NR_SHARDS", {"-4"}, Status::Code::kProtocolError, "'-4'"},
      {"SCYLLA_NR_SHARDS", {"+4"}, Status::Code::kProtocolError, "'+4'"},
      {"SCYLLA_NR_SHARDS", {"4 "}, Status::Code::kProtocolError, "'4 '"},
      {"SCYLLA_NR_SHARDS", {""}, Status::Code::kProtocolError, "''"},
      {"SCYLLA_NR_SHARDS", {"twelve"}, Status::Code::kProtocolError, "twelve"},
      {"SCYLLA_NR_SHARDS", {"99999999999999999999999"}, Status::Code::kProtocolError, "9999"},
      {"SCYLLA_SHARD", {"12"}, Status::Code::kProtocolError, "[0, 11]"},
      {"SCYLLA_SHARDING_IGNORE_MSB", {"64"}, Status::Code::kProtocolError, "[0, 63]"},
      {"SCYLLA_SHARDING_ALGORITHM", {"round-robin-2"}, Status::Code::kUnsupported, "round-robin-2"},
      {"SCYLLA_SHARD_AWARE_PORT", {"0"}, Status::Code::kProtocolError, "SCYLLA_SHARD_AWARE_PORT="},
      {"SCYLLA_SHARD_AWARE_PORT", {"65536"}, Status::Code::kProtocolError, "65536"},
      {"SCYLLA_SHARD_AWARE_PORT_SSL", {"x"}, Status::Code::kProtocolError, "PORT_SSL='x'"},
  };
  for (const BadCase& c : cases) {
    auto options = ScyllaOptions();
    if (c.values.empty()) {
      options.erase(c.key);
    } else {
      options[c.key] = c.values;
    }
    auto info = ShardingInfo::Parse(options);
    ASSERT_FALSE(info.ok()) << c.key;
    EXPECT_EQ(info.status().code(), c.code) << info.status().ToString();
    EXPECT_NE(info.status().message().find(c.message_part), std::string::npos)
        << info.status().message() << " lacks " << c.message_part;
    std::string why;
    EXPECT_FALSE(ShardingInfo::FromSupported(options, &why).has_value());
    EXPECT_EQ(why, info.status().ToString());
  }
  // A key present with no value at all.
  auto options = ScyllaOptions();
  options["SCYLLA_SHARD"] = {};
  auto info = ShardingInfo::Parse(options);
  EXPECT_EQ(info.status().code(), Status::Code::kProtocolError);
  EXPECT_NE(info.status().message().find("SCYLLA_SHARD has no value"), std::string::npos);
}

// scylladb/scylla-rust-driver scylla/src/routing/sharding.rs (test_shard_of,
// values it took from gocql): 4 shards, ignore_msb 12.
TEST(ShardingTest, RustDriverVectors) {
  EXPECT_EQ(ShardOfToken(-9219783007514621794, 4, 12), 3);
  EXPECT_EQ(ShardOfToken(9222582454147032830, 4, 12), 3);
}

// scylladb/python-driver tests/unit/test_shard_aware.py
// (test_parsing_and_calculating_shard_id): 12 shards, ignore_msb 12, tokens
// of Murmur3 keys. Checks the partitioner and the shard arithmetic together.
TEST(ShardingTest, PythonDriverVectors) {
  auto info = ShardingInfo::Parse(ScyllaOptions());
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->ShardOf(TokenOf("a")), 4);
  EXPECT_EQ(info->ShardOf(TokenOf("b")), 6);
  EXPECT_EQ(info->ShardOf(TokenOf("c")), 6);
  EXPECT_EQ(info->ShardOf(TokenOf("e")), 4);
  EXPECT_EQ(info->ShardOf(TokenOf("100000")), 2);
}

TEST(ShardingTest, ShardOfEdges) {
  // The minimum token is biased to 0: shard 0 whatever the parameters.
  for (int msb : {0, 12, 63}) EXPECT_EQ(ShardOfToken(kMin, 7, msb), 0);
  // Without ignored bits the maximum token lands on the last shard and the
  // shards split the ring into nr_shards contiguous, equal pieces.
  EXPECT_EQ(ShardOfToken(kMax, 7, 0), 6);
  EXPECT_EQ(ShardOfToken(0, 2, 0), 1);   // 0 is biased to 2^63: the upper half
  EXPECT_EQ(ShardOfToken(-1, 2, 0), 0);
  // One shard: everything on shard 0.
  for (int64_t t : {kMin, int64_t{-1}, int64_t{0}, kMax}) EXPECT_EQ(ShardOfToken(t, 1, 12), 0);
  // ignore_msb drops the top bits: with msb 1, tokens 2^63 apart share a shard.
  EXPECT_EQ(ShardOfToken(-5, 8, 1), ShardOfToken(kMax - 4, 8, 1));
}

TEST(ShardingTest, ShardOfMatches128BitArithmetic) {
  std::mt19937_64 rng(42);
  for (int nr_shards : {1, 2, 3, 7, 12, 64, 255, 1000, 65535}) {
    for (int msb : {0, 1, 12, 31, 63}) {
      for (int i = 0; i < 2000; ++i) {
        const int64_t token = static_cast<int64_t>(rng());
        const int shard = ShardOfToken(token, nr_shards, msb);
        ASSERT_EQ(shard, Int128ShardOf(token, nr_shards, msb))
            << "token " << token << " nr_shards " << nr_shards << " msb " << msb;
        ASSERT_GE(shard, 0);
        ASSERT_LT(shard, nr_shards);
      }
    }
  }
}

std::vector<uint16_t> Drain(ShardPortIterator it) {
  std::vector<uint16_t> out;
  while (auto p = it.Next()) out.push_back(*p);
  EXPECT_EQ(it.remaining(), 0u);
  EXPECT_FALSE(it.Next().has_value());
  return out;
}

TEST(ShardingTest, SourcePortsCoverTheShardsPortsExactlyOnce) {
  for (int nr_shards : {1, 3, 4, 12, 16383, 16384, 16385}) {
    ShardingInfo info;
    info.nr_shards = nr_shards;
    std::set<int> shards_with_ports;
    std::set<uint16_t> all_ports;
    // Every shard of small counts; a few (some with no port at all) of large ones.
    std::vector<int> to_check = {0, 1, nr_shards - 4, nr_shards - 1};
    if (nr_shards <= 12) {
      to_check.clear();
      for (int s = 0; s < nr_shards; ++s) to_check.push_back(s);
    }
    for (int shard : to_check) {
      ShardPortIterator it = info.SourcePorts(shard, /*random_offset=*/0x9E3779B97F4A7C15ULL);
      const size_t size = it.size();
      const std::vector<uint16_t> ports = Drain(it);
      ASSERT_EQ(ports.size(), size);
      // Expected: every port of [49152, 65535] whose shard is `shard`.
      size_t expected = 0;
      for (uint32_t p = kMinShardAwareSourcePort; p <= kMaxShardAwareSourcePort; ++p) {
        if (static_cast<int>(p % nr_shards) == shard) ++expected;
      }
      EXPECT_EQ(ports.size(), expected) << "nr_shards " << nr_shards << " shard " << shard;
      std::set<uint16_t> distinct(ports.begin(), ports.end());
      EXPECT_EQ(distinct.size(), ports.size());
      for (uint16_t p : ports) {
        ASSERT_GE(p, kMinShardAwareSourcePort);
        ASSERT_EQ(info.ShardOfSourcePort(p), shard);
      }
      if (!ports.empty()) shards_with_ports.insert(shard);
      all_ports.insert(ports.begin(), ports.end());
    }
    if (nr_shards <= 12) {
      // All shards together use the whole range.
      EXPECT_EQ(all_ports.size(), 65535u - 49152u + 1u);
      EXPECT_EQ(shards_with_ports.size(), static_cast<size_t>(nr_shards));
    }
  }
}

TEST(ShardingTest, SourcePortsStartAtTheOffsetAndWrapAround) {
  // 12 shards, shard 5: candidates 49157, 49169, ..., the highest <= 65535.
  const uint16_t first = 49157;  // 49152 % 12 == 0
  ASSERT_EQ(first % 12, 5);
  ShardPortIterator probe(5, 12, 0);
  const size_t count = probe.size();
  const uint16_t last = static_cast<uint16_t>(first + (count - 1) * 12);
  ASSERT_LE(last, 65535);
  ASSERT_GT(last + 12, 65535);

  // Offset 0 starts at the lowest candidate, in increasing order.
  auto from0 = Drain(ShardPortIterator(5, 12, 0));
  EXPECT_EQ(from0.front(), first);
  EXPECT_EQ(from0.back(), last);
  // Offset k starts at candidate k, wraps after the highest, and stops just
  // before where it began.
  auto from3 = Drain(ShardPortIterator(5, 12, 3));
  ASSERT_EQ(from3.size(), count);
  EXPECT_EQ(from3[0], first + 3 * 12);
  EXPECT_EQ(from3[count - 4], last);
  EXPECT_EQ(from3[count - 3], first);
  EXPECT_EQ(from3[count - 1], first + 2 * 12);
  // The offset is taken modulo the number of candidates.
  EXPECT_EQ(Drain(ShardPortIterator(5, 12, 3 + count)), from3);
  EXPECT_EQ(Drain(ShardPortIterator(5, 12, ~uint64_t{0})).size(), count);
  // Deterministic: same arguments, same sequence.
  EXPECT_EQ(Drain(ShardPortIterator(5, 12, 777)), Drain(ShardPortIterator(5, 12, 777)));
}

TEST(ShardingTest, SourcePortsInACustomRange) {
  // [21371, 42424] with 4 shards, as in the Rust driver's test; 21371 % 4 == 3.
  auto shard3 = Drain(ShardPortIterator(3, 4, 0, 21371, 42424));
  EXPECT_EQ(shard3.front(), 21371);
  EXPECT_EQ(shard3.size(), (42424u - 21371u) / 4 + 1);
  auto shard0 = Drain(ShardPortIterator(0, 4, 0, 21371, 42424));
  EXPECT_EQ(shard0.front(), 21372);
  EXPECT_EQ(shard0.back(), 42424);
  // A range with no port of the shard gives nothing (Rust driver: a range too small).
  EXPECT_TRUE(Drain(ShardPortIterator(1, 4, 0, 49152, 49152)).empty());
  EXPECT_EQ(Drain(ShardPortIterator(0, 4, 5, 49152, 49152)), std::vector<uint16_t>{49152});
  // More shards than ports: 49152..65535 are 16384 ports, so with 16385
  // shards one shard (49152 % 16385 == 16382; the residue just below) has none.
  EXPECT_EQ(ShardPortIterator(16381, 16385, 0).size(), 0u);
  EXPECT_EQ(ShardPortIterator(16382, 16385, 0).size(), 1u);
  // The top of the port space does not overflow.
  EXPECT_EQ(Drain(ShardPortIterator(65535 % 7, 7, 0, 65535, 65535)), std::vector<uint16_t>{65535});
}

TEST(ShardingTest, SourcePortsWithInvalidArgumentsAreEmpty) {
  EXPECT_TRUE(Drain(ShardPortIterator(0, 0, 0)).empty());
  EXPECT_TRUE(Drain(ShardPortIterator(-1, 4, 0)).empty());
  EXPECT_TRUE(Drain(ShardPortIterator(4, 4, 0)).empty());
  EXPECT_TRUE(Drain(ShardPortIterator(0, 4, 0, 50000, 40000)).empty());
  EXPECT_TRUE(Drain(ShardPortIterator()).empty());
}

}  // namespace
}  // namespace cqlstream::routing
