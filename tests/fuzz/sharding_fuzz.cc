// Copyright (c) cqlstream authors.
//
// libFuzzer target for a ScyllaDB node's sharding options: the SUPPORTED
// answer's multimap (keys drawn from the SCYLLA_* names and others, each
// with no, one or several values: a number in or out of its range, signs,
// spaces, or arbitrary bytes) parsed by routing::ShardingInfo::Parse
// (net/routing/sharding.h), then the shard of tokens and the source ports
// of a shard computed from what it parsed.
//
// Checked (abort): Parse and FromSupported agree; what Parse accepts is in
// range (1 <= nr_shards <= 65535, 0 <= shard < nr_shards, ignore_msb
// 0..63, ports 1..65535, the one algorithm); ShardOf equals the formula of
// the protocol extension in 128-bit arithmetic; the source ports of a shard
// are the ports of [49152, 65535] that map to it, each once, in the
// promised order, as many as size() says. Nothing may crash, trap (UBSan) or leak (ASan).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "net/routing/sharding.h"

namespace cqlstream::routing {
namespace {

using fuzz::Check;

std::string Value(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0: return std::to_string(in.ConsumeIntegralInRange<int64_t>(-2, 70000));
    case 1: return std::to_string(in.ConsumeIntegralInRange<int>(0, 64));
    case 2: return std::to_string(in.ConsumeIntegral<uint64_t>());
    case 3: return std::string(in.ConsumeBool() ? "+" : " ") + std::to_string(in.ConsumeIntegralInRange<int>(0, 9));
    case 4: return std::string(kBiasedTokenRoundRobin);
    default: return in.ConsumeRandomLengthString(24);
  }
}

// The ports of [49152, 65535] that map to `shard`, each once, in the order
// sharding.h promises: ascending from candidate offset % size(), then from
// the lowest.
void CheckPorts(const ShardingInfo& info, int shard, uint64_t offset) {
  std::vector<uint16_t> candidates;
  for (uint32_t p = kMinShardAwareSourcePort; p <= kMaxShardAwareSourcePort; ++p) {
    if (static_cast<int>(p % static_cast<uint32_t>(info.nr_shards)) == shard) {
      candidates.push_back(static_cast<uint16_t>(p));
    }
  }
  ShardPortIterator it = info.SourcePorts(shard, offset);
  Check(it.size() == candidates.size());
  const size_t start = candidates.empty() ? 0 : static_cast<size_t>(offset % candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::optional<uint16_t> p = it.Next();
    Check(p.has_value() && *p == candidates[(start + i) % candidates.size()]);
    Check(info.ShardOfSourcePort(*p) == shard);
  }
  Check(!it.Next().has_value() && it.remaining() == 0);
}

}  // namespace
}  // namespace cqlstream::routing

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cqlstream::routing;
  using cqlstream::fuzz::Check;
  FuzzedDataProvider in(data, size);
  static const char* const kKeys[] = {"SCYLLA_SHARD",          "SCYLLA_NR_SHARDS",
                                      "SCYLLA_SHARDING_ALGORITHM", "SCYLLA_SHARDING_IGNORE_MSB",
                                      "SCYLLA_PARTITIONER",    "SCYLLA_SHARD_AWARE_PORT",
                                      "SCYLLA_SHARD_AWARE_PORT_SSL", "CQL_VERSION"};
  ShardingInfo::Options options;
  const int keys = in.ConsumeIntegralInRange<int>(0, 10);
  for (int k = 0; k < keys; ++k) {
    const size_t i = in.ConsumeIntegralInRange<size_t>(0, std::size(kKeys));
    std::string key = i < std::size(kKeys) ? kKeys[i] : in.ConsumeRandomLengthString(24);
    std::vector<std::string> values;
    const int n = in.ConsumeIntegralInRange<int>(0, 2);
    for (int v = 0; v < n; ++v) values.push_back(Value(in));
    options[std::move(key)] = std::move(values);
  }
  auto parsed = ShardingInfo::Parse(options);
  std::string why;
  Check(ShardingInfo::FromSupported(options, &why).has_value() == parsed.ok());
  Check(parsed.ok() == why.empty());
  if (!parsed.ok()) return 0;
  const ShardingInfo& info = *parsed;
  Check(info.nr_shards >= 1 && info.nr_shards <= 65535);
  Check(info.shard >= 0 && info.shard < info.nr_shards);
  Check(info.ignore_msb >= 0 && info.ignore_msb <= 63);
  Check(info.algorithm == kBiasedTokenRoundRobin);
  Check(!info.shard_aware_port || *info.shard_aware_port >= 1);
  Check(!info.shard_aware_port_ssl || *info.shard_aware_port_ssl >= 1);
  for (int k = 0; k < 4; ++k) {
    const int64_t token = in.ConsumeIntegral<int64_t>();
    const uint64_t biased = (static_cast<uint64_t>(token) + (uint64_t{1} << 63)) << info.ignore_msb;
    const auto reference = static_cast<int>(
        (static_cast<unsigned __int128>(biased) * static_cast<unsigned __int128>(info.nr_shards)) >> 64);
    const int shard = info.ShardOf(token);
    Check(shard == reference && shard >= 0 && shard < info.nr_shards);
  }
  CheckPorts(info, info.shard, in.ConsumeIntegral<uint64_t>());
  CheckPorts(info, in.ConsumeIntegralInRange<int>(0, info.nr_shards - 1), in.ConsumeIntegral<uint64_t>());
  return 0;
}
